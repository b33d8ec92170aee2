package webhook

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Results of an admission request, the label of ingress_reactor_admission_requests_total.
const (
	resultAllowed = "allowed" // an Ingress of our class, admitted without a warning
	resultWarned  = "warned"  // admitted with warnings
	resultDenied  = "denied"
	// resultSkipped: admitted without a look (another class or namespace, DELETE, another resource).
	resultSkipped = "skipped"
	// resultInvalid: not an AdmissionReview we accept (HTTP 4xx).
	resultInvalid = "invalid"
	// resultUnavailable: the caches are not synced yet (HTTP 503; the failure policy decides).
	resultUnavailable = "unavailable"
)

// maxWarnings bounds the warnings of one response; the API server keeps about 4 KiB of them anyway.
const maxWarnings = 10

var ingressGVK = metav1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}

// Handler returns the HTTP handler: POST of an admission.k8s.io/v1 AdmissionReview to Path, nothing else.
func (w *Webhook) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Path, w.serveReview)
	return mux
}

// httpError is a request the webhook does not answer with an AdmissionReview.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func (w *Webhook) serveReview(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	resp, result, err := w.answer(rw, r)
	w.metrics.duration.Observe(time.Since(start).Seconds())
	w.metrics.requests.WithLabelValues(result).Inc()
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			he = &httpError{code: http.StatusInternalServerError, msg: err.Error()}
		}
		w.log.Debug("admission request refused", zap.Int("status", he.code), zap.String("reason", he.msg))
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Header().Set("X-Content-Type-Options", "nosniff")
		rw.WriteHeader(he.code)
		_, _ = io.WriteString(rw, he.msg+"\n")
		return
	}
	body, err := utiljson.Marshal(resp)
	if err != nil {
		http.Error(rw, "encode response", http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(body)
}

// answer reads and judges one AdmissionReview.
func (w *Webhook) answer(rw http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, string, error) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		return nil, resultInvalid, &httpError{http.StatusMethodNotAllowed, "only POST is served"}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, resultInvalid, &httpError{http.StatusUnsupportedMediaType, "Content-Type must be application/json"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, resultInvalid, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("an AdmissionReview is at most %d bytes", MaxBodyBytes)}
		}
		return nil, resultInvalid, &httpError{http.StatusBadRequest, "read body: " + err.Error()}
	}
	review, err := decodeReview(body)
	if err != nil {
		return nil, resultInvalid, &httpError{http.StatusBadRequest, err.Error()}
	}
	req := review.Request
	out := &admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}}
	if req.Kind != ingressGVK || req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return out, resultSkipped, nil // not an Ingress being written: not ours to judge
	}
	ing, err := decodeIngress(req)
	if err != nil {
		return nil, resultInvalid, &httpError{http.StatusBadRequest, err.Error()}
	}
	if (w.opts.WatchNamespace != "" && ing.Namespace != w.opts.WatchNamespace) || (w.opts.Accepts != nil && !w.opts.Accepts(ing)) {
		return out, resultSkipped, nil
	}
	if !w.ready.Load() {
		return nil, resultUnavailable, &httpError{http.StatusServiceUnavailable, "the controller's caches are not synced yet"}
	}
	select {
	case w.reviews <- struct{}{}:
		defer func() { <-w.reviews }()
	case <-r.Context().Done():
		return nil, resultUnavailable, &httpError{http.StatusServiceUnavailable, "too many admission reviews at once"}
	}
	verdict := w.review(ing)
	if verdict.Err != nil {
		out.Response.Allowed = false
		out.Response.Result = &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusBadRequest,
			Reason:  metav1.StatusReasonBadRequest,
			Message: verdict.Err.Error(),
		}
		return out, resultDenied, nil
	}
	if len(verdict.Warnings) == 0 {
		return out, resultAllowed, nil
	}
	for i, msg := range verdict.Warnings {
		if i == maxWarnings {
			out.Response.Warnings = append(out.Response.Warnings, fmt.Sprintf("and %d more warnings (see the Ingress's Events)", len(verdict.Warnings)-i))
			break
		}
		out.Response.Warnings = append(out.Response.Warnings, printable(msg))
	}
	return out, resultWarned, nil
}

// decodeReview parses an admission.k8s.io/v1 AdmissionReview with a request, case-sensitively, as the
// API server writes it.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := utiljson.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("not an AdmissionReview: %w", err)
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("want apiVersion admission.k8s.io/v1, kind AdmissionReview; got %.40q, %.40q", review.APIVersion, review.Kind)
	}
	if review.Request == nil || review.Request.UID == "" {
		return nil, errors.New("AdmissionReview without a request or its uid")
	}
	if review.Response != nil {
		return nil, errors.New("AdmissionReview with a response: that is the webhook's to write")
	}
	return &review, nil
}

// decodeIngress returns the Ingress of a CREATE or UPDATE request.
func decodeIngress(req *admissionv1.AdmissionRequest) (*networkingv1.Ingress, error) {
	if len(req.Object.Raw) == 0 {
		return nil, errors.New("request without an object")
	}
	var ing networkingv1.Ingress
	if err := utiljson.Unmarshal(req.Object.Raw, &ing); err != nil {
		return nil, fmt.Errorf("object is not an Ingress: %w", err)
	}
	if ing.APIVersion != "networking.k8s.io/v1" || ing.Kind != "Ingress" {
		return nil, fmt.Errorf("object: want apiVersion networking.k8s.io/v1, kind Ingress; got %.40q, %.40q", ing.APIVersion, ing.Kind)
	}
	// On CREATE the object may leave its namespace to the request's URL; the request's is the truth.
	if ing.Namespace != "" && ing.Namespace != req.Namespace {
		return nil, fmt.Errorf("object namespace %.80q is not the request's %.80q", ing.Namespace, req.Namespace)
	}
	if req.Namespace == "" {
		return nil, errors.New("request without a namespace: Ingresses are namespaced")
	}
	ing.Namespace = req.Namespace
	if ing.Name == "" {
		ing.Name = req.Name
	}
	return &ing, nil
}

// printable replaces the characters an HTTP Warning header cannot carry.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return ' '
		}
		return r
	}, s)
}
