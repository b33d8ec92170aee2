package nginx

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// The ConfigMap keys of the access and error logs (issue #18).

// LogSettings are the access and error log keys of the ConfigMap.
type LogSettings struct {
	// Format is log-format-upstream, parsed: literal text and checked variable names.
	Format []logFormatPart
	// EscapeJSON and EscapeNone are log-format-escape-json and log-format-escape-none.
	EscapeJSON, EscapeNone bool
	// AccessLogPath and ErrorLogPath replace RenderConfig.AccessLog and ErrorLog when set ("" keeps them).
	AccessLogPath, HTTPAccessLogPath, ErrorLogPath string
	DisableAccessLog                               bool
	// SkipURLs are request URIs (path and query, exactly) left out of the access log.
	SkipURLs []string
	// DefaultBackend logs the requests no route matches (enable-access-log-for-default-backend).
	DefaultBackend bool
	// Buffer and Flush are access-log-params: 0 for none.
	Buffer int64
	Flush  time.Duration
}

// logFormatPart is literal text, or (Variable) the name of an NGINX variable.
type logFormatPart struct {
	Text     string
	Variable bool
}

// defaultLogFormat is ingress-nginx's log-format-upstream.
const defaultLogFormat = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" ` +
	`$request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr ` +
	`$upstream_response_length $upstream_response_time $upstream_status $req_id`

// logVariables are the NGINX variables a log format may name, besides the header and argument families
// of logVariable. Each exists in every location of the configuration this controller renders (a name
// NGINX does not know would make it refuse the whole configuration).
var logVariables = map[string]bool{}

func init() {
	for _, v := range strings.Fields(`remote_addr remote_port remote_user binary_remote_addr time_local time_iso8601 msec
	request request_method request_uri uri document_uri args query_string is_args request_length request_time
	request_completion status body_bytes_sent bytes_sent connection connection_requests connection_time host hostname
	scheme https server_name server_addr server_port server_protocol pipe request_id nginx_version pid content_length
	content_type limit_rate proxy_protocol_addr proxy_protocol_port proxy_protocol_server_addr proxy_protocol_server_port
	tcpinfo_rtt tcpinfo_rttvar tcpinfo_snd_cwnd tcpinfo_rcv_space ssl_protocol ssl_cipher ssl_curves ssl_session_reused
	ssl_server_name ssl_client_verify ssl_client_s_dn ssl_client_i_dn ssl_client_serial ssl_client_fingerprint
	ssl_client_v_start ssl_client_v_end ssl_client_v_remain upstream_addr upstream_status upstream_response_time
	upstream_connect_time upstream_header_time upstream_response_length upstream_bytes_received upstream_bytes_sent
	upstream_cache_status gzip_ratio proxy_host proxy_port proxy_add_x_forwarded_for proxy_upstream_name`) {
		logVariables[v] = true
	}
}

// logVariableAliases are ingress-nginx's own variables: the name this configuration has for the same
// value, or "" for a value that is always empty here.
var logVariableAliases = map[string]string{
	"req_id":                          "ingress_reactor_request_id",
	"proxy_alternative_upstream_name": "",
}

// secretHeaders are header names (as NGINX's variables spell them) whose values are credentials: no log
// line may carry them, in requests or in responses.
var secretHeaders = map[string]bool{"authorization": true, "proxy_authorization": true, "cookie": true, "set_cookie": true,
	"x_ingress_reactor_token": true}

// logVariable checks one variable name of a log format and returns the name to write ("" for nothing).
func logVariable(name string) (string, error) {
	if alias, ok := logVariableAliases[name]; ok {
		return alias, nil
	}
	if logVariables[name] {
		return name, nil
	}
	switch {
	case strings.HasPrefix(name, "cookie_"), strings.HasPrefix(name, "upstream_cookie_"):
		return "", fmt.Errorf("$%s is refused: log lines never carry cookies", name)
	case name == "request_body" || name == "request_body_file":
		return "", fmt.Errorf("$%s is refused: request bodies may carry credentials", name)
	case strings.HasPrefix(name, "ssl_client_") && strings.HasSuffix(name, "cert"):
		return "", fmt.Errorf("$%s is refused: whole certificates do not fit a log line (log $ssl_client_s_dn or $ssl_client_fingerprint)", name)
	case name == "ssl_session_id":
		return "", fmt.Errorf("$%s is refused: it would let a reader of the log resume the TLS session", name)
	}
	for _, family := range []string{"http_", "sent_http_", "sent_trailer_", "upstream_http_", "upstream_trailer_", "arg_"} {
		header, ok := strings.CutPrefix(name, family)
		if !ok || header == "" {
			continue
		}
		if family != "arg_" && secretHeaders[header] {
			return "", fmt.Errorf("$%s is refused: log lines never carry Authorization headers or cookies", name)
		}
		return name, nil
	}
	return "", fmt.Errorf("$%s is not a variable this controller can log", name)
}

func isVariableNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// parseLogFormat splits a log format into literal text and variables ($name or ${name}), checking each
// variable with logVariable. Literal text may hold any printable character but '$'.
func parseLogFormat(v string) ([]logFormatPart, error) {
	if v == "" || len(v) > 4096 {
		return nil, fmt.Errorf("want a format of 1 to 4096 bytes")
	}
	if err := checkQuotable(strings.ReplaceAll(v, "$", "")); err != nil {
		return nil, fmt.Errorf("control characters and invalid UTF-8 are refused")
	}
	var parts []logFormatPart
	literal := func(s string) {
		if s == "" {
			return
		}
		if n := len(parts); n > 0 && !parts[n-1].Variable {
			parts[n-1].Text += s
			return
		}
		parts = append(parts, logFormatPart{Text: s})
	}
	for v != "" {
		i := strings.IndexByte(v, '$')
		if i < 0 {
			literal(v)
			break
		}
		literal(v[:i])
		v = v[i+1:]
		var name string
		if strings.HasPrefix(v, "{") {
			end := strings.IndexByte(v, '}')
			if end < 0 {
				return nil, fmt.Errorf("${ without }")
			}
			name, v = v[1:end], v[end+1:]
		} else {
			n := 0
			for n < len(v) && (isVariableNameChar(v[n]) || v[n] >= 'A' && v[n] <= 'Z') {
				n++
			}
			name, v = v[:n], v[n:]
		}
		if name == "" {
			return nil, fmt.Errorf("a $ must start a variable name ($ cannot be written as text)")
		}
		for i := 0; i < len(name); i++ {
			if !isVariableNameChar(name[i]) {
				return nil, fmt.Errorf("%s is not a variable name (lower-case letters, digits and _)", quoteValue("$"+name))
			}
		}
		out, err := logVariable(name)
		if err != nil {
			return nil, err
		}
		if out != "" {
			parts = append(parts, logFormatPart{Text: out, Variable: true})
		}
	}
	if len(parts) == 0 {
		parts = []logFormatPart{{Text: "-"}} // only always-empty variables: NGINX wants some format
	}
	return parts, nil
}

// parseLogPath accepts an absolute file path of plain characters; /dev/stdout and /dev/stderr write to
// the pod's output.
func parseLogPath(v string) (string, error) {
	if !filepath.IsAbs(v) || filepath.Clean(v) != v || len(v) > 1024 {
		return "", fmt.Errorf("want an absolute, clean file path such as /dev/stdout or /var/log/nginx/access.log")
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._-+", c) >= 0) {
			return "", fmt.Errorf("want a file path of letters, digits and /._-+")
		}
	}
	return v, nil
}

func logPathField(field func(*Settings) *string) func(*Settings, string) error {
	return settingsField(field, parseLogPath)
}

// isSkipURL reports whether w is a request URI of plain characters (no spaces, quotes, '$' or '\').
func isSkipURL(w string) bool {
	if !strings.HasPrefix(w, "/") || len(w) > 1024 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"'\\$;{}`", c) >= 0 {
			return false
		}
	}
	return true
}

func init() {
	registerSettings(
		settingKey{Name: "log-format-upstream", Default: defaultLogFormat,
			Values: "text with NGINX variables (`$name` or `${name}`); see the difference for the variables refused",
			Doc:    "The format of access log lines.",
			Difference: "Variables are checked: `$req_id` is the request's X-Request-ID, `$proxy_alternative_upstream_name` is always empty, " +
				"`$namespace`, `$ingress_name`, `$service_name`, `$service_port` and `$location_path` do not exist here, and names NGINX does not know " +
				"are refused (ingress-nginx let NGINX refuse the whole configuration). Log lines never carry credentials: `$http_authorization`, " +
				"`$http_proxy_authorization`, `$http_cookie`, `$cookie_*`, `$upstream_cookie_*`, Set-Cookie of responses, `$request_body`, whole " +
				"client certificates and `$ssl_session_id` are refused. `$` cannot be written as text.",
			set: settingsField(func(s *Settings) *[]logFormatPart { return &s.Logs.Format }, parseLogFormat)},
		settingKey{Name: "log-format-escape-json", Default: "false", Values: boolValues,
			Doc: "Escape variables for JSON strings (log_format escape=json).",
			set: boolField(func(s *Settings) *bool { return &s.Logs.EscapeJSON })},
		settingKey{Name: "log-format-escape-none", Default: "false", Values: boolValues,
			Doc: "Write variables without escaping (log_format escape=none); wins over log-format-escape-json.",
			set: boolField(func(s *Settings) *bool { return &s.Logs.EscapeNone })},
		settingKey{Name: "access-log-path", Overlay: true, Default: "/dev/stdout", Values: "an absolute file path of letters, digits and `/._-+`",
			Doc: "Where the access log goes; the pod's output by default. NGINX must be able to create the file.",
			Difference: "ingress-nginx's default /var/log/nginx/access.log is a link to /dev/stdout in its image; here the default is the pod's " +
				"output itself. Paths with variables or syslog are refused.",
			set: logPathField(func(s *Settings) *string { return &s.Logs.AccessLogPath })},
		settingKey{Name: "http-access-log-path", Overlay: true, Values: "an absolute file path of letters, digits and `/._-+`",
			Doc: "Where the access log goes; wins over access-log-path.",
			set: logPathField(func(s *Settings) *string { return &s.Logs.HTTPAccessLogPath })},
		settingKey{Name: "error-log-path", Overlay: true, Default: "/dev/stderr", Values: "an absolute file path of letters, digits and `/._-+`",
			Doc: "Where NGINX's error log goes; the pod's output (through the controller's log) by default.",
			Difference: "ingress-nginx's default /var/log/nginx/error.log is a link to /dev/stderr in its image; here the default is the " +
				"controller's log, which carries NGINX's error lines.",
			set: logPathField(func(s *Settings) *string { return &s.Logs.ErrorLogPath })},
		settingKey{Name: "disable-access-log", Default: "false", Values: boolValues,
			Doc: "Turn the access log off.",
			set: boolField(func(s *Settings) *bool { return &s.Logs.DisableAccessLog })},
		settingKey{Name: "skip-access-log-urls", Values: "request URIs separated by commas or spaces (at most 64), each starting with `/`",
			Doc: "Requests whose URI (path and query) is exactly one of these are not logged.",
			set: settingsField(func(s *Settings) *[]string { return &s.Logs.SkipURLs }, func(v string) ([]string, error) {
				return wordList(v, 64, isSkipURL, "request URIs")
			})},
		settingKey{Name: "enable-access-log-for-default-backend", Default: "false", Values: boolValues,
			Doc: "Log the requests no route matches (those the default backend answers).",
			set: boolField(func(s *Settings) *bool { return &s.Logs.DefaultBackend })},
		settingKey{Name: "access-log-params", Values: "`buffer=SIZE` (4k to 64m) and `flush=TIME` (1s to 1h; needs buffer), separated by spaces or commas",
			Doc:        "Buffer access log lines, and write them at least every flush time.",
			Difference: "Only buffer and flush: gzip and other parameters are refused.",
			set: func(s *Settings, v string) error {
				s.Logs.Buffer, s.Logs.Flush = 0, 0
				words := strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
				for _, w := range words {
					name, val, _ := strings.Cut(w, "=")
					var err error
					switch name {
					case "buffer":
						s.Logs.Buffer, err = parseSettingSize(val, 4<<10, 64<<20)
					case "flush":
						s.Logs.Flush, err = parseSettingSeconds(val, time.Second, time.Hour)
					default:
						err = fmt.Errorf("want buffer=SIZE or flush=TIME, got %s", quoteValue(w))
					}
					if err != nil {
						return fmt.Errorf("%s: %v", name, err)
					}
				}
				if s.Logs.Flush > 0 && s.Logs.Buffer == 0 {
					return fmt.Errorf("flush needs buffer")
				}
				return nil
			}},
	)
}

// overlay applies the log keys that replace RenderConfig fields.
func (l LogSettings) overlay(c RenderConfig) RenderConfig {
	switch {
	case l.DisableAccessLog:
		c.AccessLog = ""
	case l.HTTPAccessLogPath != "":
		c.AccessLog = l.HTTPAccessLogPath
	case l.AccessLogPath != "":
		c.AccessLog = l.AccessLogPath
	}
	switch l.ErrorLogPath {
	case "":
	case "/dev/stderr":
		c.ErrorLog = "stderr"
	default:
		c.ErrorLog = l.ErrorLogPath
	}
	return c
}

// logsView is what the template sees of LogSettings.
type logsView struct {
	// Format is log_format's arguments after the name: an optional escape= and quoted text and $names.
	Format string
	// SkipURLs are quoted request URIs.
	SkipURLs []string
	// Params are access_log's buffer= and flush=, with a leading space, or "".
	Params string
	// DefaultBackend is "true" or "false", printed into Lua code.
	DefaultBackend string
}

func newLogsView(q *quoter, l LogSettings) logsView {
	var args []string
	switch {
	case l.EscapeNone:
		args = append(args, "escape=none")
	case l.EscapeJSON:
		args = append(args, "escape=json")
	}
	format := l.Format
	if len(format) == 0 {
		format = []logFormatPart{{Text: "-"}}
	}
	for _, p := range format {
		if p.Variable {
			args = append(args, "$"+p.Text) // checked by parseLogFormat: lower-case letters, digits and _
		} else {
			args = append(args, q.quote(p.Text))
		}
	}
	v := logsView{Format: strings.Join(args, " "), DefaultBackend: fmt.Sprint(l.DefaultBackend)}
	for _, u := range l.SkipURLs {
		v.SkipURLs = append(v.SkipURLs, q.quote(u))
	}
	if l.Buffer > 0 {
		v.Params = fmt.Sprintf(" buffer=%d", l.Buffer)
	}
	if l.Flush > 0 {
		v.Params += fmt.Sprintf(" flush=%ds", int64(l.Flush.Round(time.Second)/time.Second))
	}
	return v
}
