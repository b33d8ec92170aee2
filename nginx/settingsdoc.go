package nginx

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SettingsMarkdown renders the ConfigMap keys as docs/configmap.md, from the registry the controller parses
// with; a test keeps the two equal.
func SettingsMarkdown() string {
	var b strings.Builder
	count := map[SettingStatus]int{}
	for _, u := range unsupportedSettings {
		count[u.status]++
	}
	b.WriteString("# The ConfigMap\n\n")
	b.WriteString("Generated from the settings registry in `nginx/` (`go run ./hack/configmapdoc > docs/configmap.md`);\n")
	b.WriteString("`nginx/settingsdoc_test.go` fails when this file differs from it.\n\n")
	fmt.Fprintf(&b, "`--configmap=namespace/name` names ingress-nginx's ConfigMap. Of its %d keys, %d are supported here, %d planned,\n",
		len(settingKeys)+len(unsupportedSettings), len(settingKeys), count[SettingPlanned])
	fmt.Fprintf(&b, "%d are accepted without effect for good and %d (the snippets) are refused.\n\n", count[SettingIgnored], count[SettingRefused])
	b.WriteString(`## How the ConfigMap is applied

- The controller watches the ConfigMap: a change applies without a restart. Most keys are NGINX directives,
  so a change reloads NGINX once (its connections finish on the old workers); the proxy defaults and HSTS
  reach the Lua router with the same reload.
- Every value is parsed into a typed value (numbers, sizes, times, on/off, words of a fixed alphabet): no
  text of the ConfigMap reaches nginx.conf as written, so a value cannot add directives.
- **An invalid value** keeps that key's last good value (or, after a restart, its default) and everything
  else in the ConfigMap applies. The controller records a Warning Event ` + "`InvalidSetting`" + ` on the ConfigMap
  naming the key, the value and what is accepted, logs the same, and counts it in
  ` + "`ingress_reactor_configmap_problems`" + `.
- **Keys without effect** (planned, ignored, refused below) and **unknown keys** get the same Warning, once per
  change of the ConfigMap; the rest applies.
- A ConfigMap missing at the start means ingress-nginx's defaults, with a log line; creating it later applies it. Deleting it keeps its settings applied (as ingress-nginx does) until it is created again or the controller restarts.
- The objects that keys name are watched too: the ConfigMaps of ` + "`add-headers`" + ` and ` + "`proxy-set-headers`" + `, and the Secret
  of ` + "`ssl-dh-param`" + ` (followed alone, in any namespace); a change of them applies like a change of the ConfigMap.
- Keys marked *replaces a flag* take the place of the flag of the same meaning when the ConfigMap sets them
  (` + "`worker-processes`" + ` and ` + "`--worker-processes`" + `, ...); without the key the flag's value applies.

## Supported keys

| key | default | values | what it does here |
|---|---|---|---|
`)
	for _, name := range slices.Sorted(maps.Keys(settingKeys)) {
		k := settingKeys[name]
		def := "`" + k.Default + "`"
		if k.Default == "" {
			def = "none"
		}
		doc := k.Doc
		if k.Overlay {
			doc = "*Replaces a flag.* " + doc
		}
		if k.Difference != "" {
			doc += " **Difference:** " + k.Difference
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, cell(def), cell(k.Values), cell(doc))
	}
	for _, st := range []struct {
		status SettingStatus
		title  string
	}{{SettingPlanned, "Planned keys"}, {SettingIgnored, "Keys without effect"}, {SettingRefused, "Refused keys"}} {
		if count[st.status] == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n| key | why |\n|---|---|\n", st.title)
		for _, name := range slices.Sorted(maps.Keys(unsupportedSettings)) {
			if u := unsupportedSettings[name]; u.status == st.status {
				fmt.Fprintf(&b, "| `%s` | %s |\n", name, cell(u.reason))
			}
		}
	}
	return b.String()
}
