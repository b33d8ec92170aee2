package nginx

import "fmt"

// The ConfigMap's custom-http-errors (issue #18): the default of the annotation of that name.

func init() {
	registerSettings(settingKey{Name: "custom-http-errors", Values: "a comma-separated list of HTTP status codes from 300 to 599",
		Doc: "The custom-http-errors of the Ingresses without that annotation: their routes' answers with these codes come from the " +
			"default backend (see custom-http-errors in docs/annotations.md).",
		Difference: "Applies to the Ingresses' routes, as a profile setting: requests no route matches are not intercepted.",
		set: settingsField(func(s *Settings) *string { return &s.CustomHTTPErrors }, func(v string) (string, error) {
			codes, ok := parseHTTPErrorCodes(v)
			if !ok {
				return "", fmt.Errorf("want HTTP status codes from 300 to 599 separated by commas")
			}
			return codes, nil
		})})
}

// customHTTPErrorsDefault gives an Ingress without custom-http-errors the ConfigMap's codes.
func (t *translator) customHTTPErrorsDefault() {
	if _, set := t.ing.Annotations[AnnotationCustomHTTPErrors]; !set && t.opts.CustomHTTPErrors != "" {
		t.profile.CustomHTTPErrors = t.opts.CustomHTTPErrors
	}
}
