package nginx

import (
	"fmt"
	"strings"
)

// The ConfigMap keys of the balancing group (ann_affinity.go): defaults of the load-balance and
// upstream-hash-by annotations for Ingresses that choose no balancing. Both are route data: a change
// re-translates the Ingresses and pushes their routes, and nginx.conf stays as it was.

func init() {
	registerSettings(
		settingKey{Name: "load-balance", Default: "round_robin", Values: "`round_robin` or `ewma`",
			Doc: "The default of the load-balance annotation: how the Lua balancer picks an endpoint for the routes of Ingresses " +
				"without affinity, upstream-hash-by or load-balance annotations (and for the canaries, whose own annotations decide " +
				"as on a main Ingress).",
			Difference: "Route data: a change never reloads NGINX. ingress-nginx's other names (`chash`, `chashsubset`, " +
				"`sticky_balanced`, `sticky_persistent`) and unknown values are refused (the last good value stays applied); " +
				"ingress-nginx took those names as that balancer without its settings (no hash key, no cookie), and unknown " +
				"values as round robin.",
			set: func(s *Settings, v string) error {
				switch strings.ToLower(v) {
				case "round_robin":
					s.LoadBalance = ""
				case "ewma":
					s.LoadBalance = "ewma"
				default:
					return fmt.Errorf("want round_robin or ewma")
				}
				return nil
			}},
		settingKey{Name: "upstream-hash-by", Values: hashValues,
			Doc: "The default of the upstream-hash-by annotation: consistent hashing on the expression for the routes of " +
				"Ingresses without affinity, upstream-hash-by or load-balance annotations. It wins over the key load-balance.",
			Difference: "ingress-nginx parses the key but applies it nowhere since its Lua balancer (0.2x); here it is the " +
				"default it was meant to be, route data that never reloads NGINX. The same variables as the annotation's are " +
				"allowed; any other expression is refused (the last good value stays applied).",
			set: func(s *Settings, v string) error {
				if v == "" {
					s.UpstreamHashBy = ""
					return nil
				}
				if problem := hashExpressionProblem(v); problem != "" {
					return fmt.Errorf("%s", problem)
				}
				s.UpstreamHashBy = v
				return nil
			}},
	)
}
