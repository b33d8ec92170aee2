// Package secretsync keeps the certificates of TLS Secrets that accepted Ingresses reference (and the
// --default-ssl-certificate Secret): it validates them and publishes a CertChange for each change; the
// reloader hands them to NGINX's workers through Lua, so no Secret's private key is written to disk.
// Secrets nobody references are ignored. The only file it writes is the generated default certificate's,
// which nginx.conf names as ssl_certificate; at start it removes Secret files an earlier version left in
// the ssl directory.
package secretsync

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the secret syncer into the application.
var Module = fx.Module("secretsync",
	fx.Provide(New),
	fx.Invoke(func(*Syncer) {}),
)

// Event reasons on Ingresses whose TLS Secret cannot be used.
const (
	ReasonSecretNotFound = "TLSSecretNotFound"
	ReasonSecretInvalid  = "TLSSecretInvalid"
	ReasonSecretWarning  = "TLSSecretWarning"
)

// Options configure the syncer.
type Options struct {
	// DefaultCertificate is --default-ssl-certificate; zero means none.
	DefaultCertificate types.NamespacedName
	// Store is the ssl directory (--ssl-dir): the generated default certificate is renewed there, and
	// Secret files an earlier version wrote are removed from it at start.
	Store *certs.Store
	// FakeDefault is the generated default certificate already written to Store (nil: none). Without
	// DefaultCertificate it is served as the default through the certificate lane, and it is generated
	// again before it expires, so a long-running controller never serves an expired fallback.
	FakeDefault *certs.Certificate
	// RenewCheck is how often the fake certificate's expiry is checked; default one hour.
	RenewCheck time.Duration
}

// FakeDefaultID is the certificate lane's name of the generated default certificate. "-" is not a valid
// namespace, so no Secret can collide with it.
var FakeDefaultID = types.NamespacedName{Namespace: "-", Name: certs.FakeDefaultKey.Name}

// Params are the syncer's fx inputs.
type Params struct {
	fx.In
	Options        Options
	Factory        informers.SharedInformerFactory
	IngressChanges *pipeline.Topic[modules.IngressChange]
	CertChanges    *pipeline.Topic[modules.CertChange]
	Recorder       record.EventRecorder
	Metrics        *pipeline.Metrics
	Registry       prometheus.Registerer
	Log            *zap.Logger
	Lifecycle      fx.Lifecycle `optional:"true"`
}

// Syncer is the secret syncer.
type Syncer struct {
	opts      Options
	secrets   modules.Secrets // the shared cache holds SecretRecords: no generated lister
	ingresses listersnetv1.IngressLister
	out       *pipeline.Topic[modules.CertChange]
	recorder  record.EventRecorder
	ctrl      *pipeline.Controller[types.NamespacedName]
	synced    []cache.InformerSynced
	log       *zap.Logger
	expire    *prometheus.Desc
	invalid   prometheus.Gauge

	mu sync.Mutex
	// byIngress and records index references both ways: byIngress holds the Secrets each accepted
	// Ingress references, records each Secret's users (beside its state). Each side is a sorted set of
	// keys in its compact form (see compactKeys): nearly every Ingress references one Secret and nearly
	// every Secret has one user, in the same namespace, and then the set is that key's name alone, in a
	// map entry the owner needs anyway. The few other sets (several keys, or a key in another namespace)
	// are slices sorted by compareKeys in moreSecrets and moreUsers.
	byIngress   map[types.NamespacedName]string
	moreSecrets map[types.NamespacedName][]types.NamespacedName
	// records holds a record for each Secret that has users or a state. One map for both (they were two)
	// keeps one key and one map slot per Secret instead of two.
	records   map[types.NamespacedName]secretRecord
	moreUsers map[types.NamespacedName][]types.NamespacedName
	// invalidCount counts the states with a problem, kept as states come and go so that no sync walks
	// every state.
	invalidCount int
}

// secretRecord is what the syncer holds for one Secret: the accepted Ingresses that reference it, and
// what sync last concluded about it. sync only writes the state; sync never runs twice for one Secret,
// so it reads the state it wrote without holding the lock in between.
type secretRecord struct {
	// user is the only user's name when the Secret has one user in its own namespace, "" otherwise;
	// moreUsers holds the users of the other Secrets that have some.
	user  string
	state secretState
}

// secretState is what the syncer last concluded about a Secret. The zero value is "unknown": not synced
// since it was last referenced (or forgotten).
type secretState struct {
	// cert is the certificate published for the Secret, nil when it is unusable. It is the one the
	// certificate lane serves, so holding it costs a pointer: its ContentHash tells a changed Secret, its
	// names and expiry are the expiry series.
	cert *certs.Certificate
	// issues is nil for a usable Secret whose content calls for no Warning Event, as for almost every
	// Secret: a pointer in the record rather than the fields, which nearly every record would hold empty.
	issues *issues
}

// issues are a Secret's problem and the Warning Events its content calls for. They are never written
// once in a state: a changed state gets new issues (withWarned), since a stored state may share them.
type issues struct {
	problem string  // why the Secret is unusable; "" when it is usable
	warned  *warned // nil when the content calls for no Warning Event, or nobody was told yet
}

// known reports whether the state says anything: a published certificate or a problem (which is never
// empty).
func (st secretState) known() bool { return st.cert != nil || st.problem() != "" }

// problem is why the Secret is unusable; "" when it is usable (or unknown).
func (st secretState) problem() string {
	if st.issues == nil {
		return ""
	}
	return st.issues.problem
}

// warned is the record of the Warning Events told about the Secret's content; nil when none were.
func (st secretState) warned() *warned {
	if st.issues == nil {
		return nil
	}
	return st.issues.warned
}

// withWarned returns st with w as its record of Warning Events, in new issues.
func (st secretState) withWarned(w *warned) secretState {
	if w == nil && st.problem() == "" {
		st.issues = nil
	} else {
		st.issues = &issues{problem: st.problem(), warned: w}
	}
	return st
}

// warned holds the Warning Events a Secret's current content calls for, and the Ingresses that got
// them: each referencing Ingress hears about a problem once, also when it starts referencing the Secret
// after the problem appeared.
type warned struct {
	notices []notice
	told    []types.NamespacedName // sorted by compareKeys
}

// notice is one Warning Event about a Secret.
type notice struct {
	reason, message string
}

// New builds the syncer and registers its informer handler and topic subscription.
func New(p Params) (*Syncer, error) {
	if p.Options.Store == nil {
		return nil, fmt.Errorf("secretsync: no certificate store")
	}
	inf := p.Factory.Core().V1().Secrets().Informer()
	ingInf := p.Factory.Networking().V1().Ingresses().Informer()
	log := p.Log.Named("secretsync")
	s := &Syncer{
		opts:      p.Options,
		secrets:   modules.NewSecrets(p.Factory),
		ingresses: p.Factory.Networking().V1().Ingresses().Lister(),
		out:       p.CertChanges,
		recorder:  p.Recorder,
		synced:    []cache.InformerSynced{inf.HasSynced, ingInf.HasSynced},
		log:       log,
		expire: prometheus.NewDesc("ingress_reactor_ssl_expire_time_seconds",
			"Unix time at which the certificate of a referenced TLS Secret expires, per name it covers.",
			[]string{"namespace", "secret", "host"}, nil),
		invalid: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_ssl_invalid_secrets",
			Help: "Referenced TLS Secrets that are missing or invalid; their hosts get the default certificate.",
		}),
		byIngress:   map[types.NamespacedName]string{},
		moreSecrets: map[types.NamespacedName][]types.NamespacedName{},
		records:     map[types.NamespacedName]secretRecord{},
		moreUsers:   map[types.NamespacedName][]types.NamespacedName{},
	}
	for _, c := range []prometheus.Collector{expiryCollector{s}, s.invalid} {
		if err := p.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("secretsync: register metrics: %w", err)
		}
	}
	q := pipeline.NewQueue(pipeline.QueueOptions[types.NamespacedName]{
		Name: "secretsync", Metrics: p.Metrics, Logger: log, QPS: 100, Burst: 1000,
	})
	s.ctrl = pipeline.NewController(q, s.sync, pipeline.ControllerOptions{Workers: 2})
	if _, err := inf.AddEventHandler(pipeline.Handler[types.NamespacedName]{
		Keys:         s.ifReferenced,
		UpdateFilter: pipeline.ResourceVersionChanged,
	}.For(q)); err != nil {
		return nil, fmt.Errorf("secretsync: secret handler: %w", err)
	}
	p.IngressChanges.Subscribe(func(c modules.IngressChange) {
		for _, k := range s.ingressChanged(c) {
			q.Add(k)
		}
	})
	modules.Bind(p.Lifecycle, s)
	return s, nil
}

// Start waits for the caches, removes Secret files an earlier version left in the ssl directory, and
// starts the workers.
func (s *Syncer) Start(ctx context.Context) {
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
			return
		}
		// Secret certificates never go to disk (NGINX's workers get them through Lua); files an earlier
		// version wrote would only keep private keys around.
		if removed, err := s.opts.Store.Prune(nil); err != nil {
			s.log.Error("clean ssl directory", zap.Error(err))
		} else if len(removed) > 0 {
			s.log.Info("removed certificate files of an earlier run", zap.Int("files", len(removed)))
		}
		s.ctrl.Start(ctx)
		if s.opts.DefaultCertificate.Name != "" {
			s.ctrl.Queue().Add(s.opts.DefaultCertificate)
		}
		s.renewFake(ctx)
	}()
}

// renewFake publishes the generated default certificate (without --default-ssl-certificate) and generates
// it again, rewriting its file and publishing it, shortly before it expires.
func (s *Syncer) renewFake(ctx context.Context) {
	fake := s.opts.FakeDefault
	if fake == nil {
		return
	}
	if s.opts.DefaultCertificate.Name == "" {
		s.out.Publish(modules.CertChange{Secret: FakeDefaultID, Certificate: fake, Default: true})
	}
	every := s.opts.RenewCheck
	if every <= 0 {
		every = time.Hour
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			if now.Before(fake.NotAfter().Add(-certs.FakeDefaultRenewBefore)) {
				continue
			}
			next, err := certs.GenerateFakeDefault(now)
			if err == nil {
				_, err = s.opts.Store.Write(next)
			}
			if err != nil {
				s.log.Error("renew the generated default certificate", zap.Error(err))
				continue
			}
			fake = next
			s.log.Info("generated default certificate renewed", zap.Time("notAfter", fake.NotAfter()))
			if s.opts.DefaultCertificate.Name == "" {
				s.out.Publish(modules.CertChange{Secret: FakeDefaultID, Certificate: fake, Default: true})
			}
		}
	}
}

// Stop stops the workers within ctx.
func (s *Syncer) Stop(ctx context.Context) error { return s.ctrl.Stop(ctx) }

// ingressChanged updates the reference index and returns the Secrets whose users changed.
func (s *Syncer) ingressChanged(c modules.IngressChange) []types.NamespacedName {
	var now []types.NamespacedName
	if c.Accepted {
		if ing, err := s.ingresses.Ingresses(c.Key.Namespace).Get(c.Key.Name); err == nil {
			now = nginx.SecretsOf(ing)
		}
	}
	slices.SortFunc(now, compareKeys)
	now = slices.Clip(slices.Compact(now))
	s.mu.Lock()
	defer s.mu.Unlock()
	before := expandKeys(c.Key.Namespace, s.byIngress[c.Key], s.moreSecrets[c.Key])
	// Every Secret the Ingress uses or used is synced: one it dropped may be unreferenced now, and one
	// it added must be written (or its problem reported on this Ingress). Both lists are sorted, so one
	// merge finds the dropped, the added and the kept ones.
	affected := make([]types.NamespacedName, 0, len(before)+len(now))
	for i, j := 0, 0; i < len(before) || j < len(now); {
		switch {
		case j == len(now) || i < len(before) && compareKeys(before[i], now[j]) < 0:
			k := before[i]
			s.setUsers(k, removeKey(s.usersLocked(k), c.Key))
			affected = append(affected, k)
			i++
		case i == len(before) || compareKeys(before[i], now[j]) > 0:
			k := now[j]
			s.setUsers(k, insertKey(s.usersLocked(k), c.Key))
			affected = append(affected, k)
			j++
		default:
			affected = append(affected, before[i])
			i++
			j++
		}
	}
	setCompact(s.byIngress, s.moreSecrets, c.Key, now)
	return affected
}

// usersLocked returns the users of Secret k, sorted by compareKeys; s.mu is held. The slice may be the
// stored one: setUsers stores what insertKey and removeKey make of it.
func (s *Syncer) usersLocked(k types.NamespacedName) []types.NamespacedName {
	return expandKeys(k.Namespace, s.records[k].user, s.moreUsers[k])
}

// setUsers stores the users of Secret k, sorted by compareKeys; s.mu is held. A record with neither
// users nor a state goes.
func (s *Syncer) setUsers(k types.NamespacedName, users []types.NamespacedName) {
	rec := s.records[k]
	var more []types.NamespacedName
	rec.user, more = compactKeys(k.Namespace, users)
	if more != nil {
		s.moreUsers[k] = more
	} else {
		delete(s.moreUsers, k)
	}
	if len(users) == 0 && !rec.state.known() {
		delete(s.records, k)
	} else {
		s.records[k] = rec
	}
}

// compactKeys turns a set of keys, sorted by compareKeys, into its compact form for an owner in
// namespace ns: one key in ns is its name alone (name, nil); any other set, but the empty one, is
// ("", keys). Names are never empty, so "" tells that there is no single name.
func compactKeys(ns string, keys []types.NamespacedName) (name string, more []types.NamespacedName) {
	switch {
	case len(keys) == 0:
		return "", nil
	case len(keys) == 1 && keys[0].Namespace == ns && keys[0].Name != "":
		return keys[0].Name, nil
	}
	return "", keys
}

// expandKeys is the set that compactKeys turned into name and more. A single name comes back in a
// new slice; otherwise more itself.
func expandKeys(ns, name string, more []types.NamespacedName) []types.NamespacedName {
	if name != "" {
		return []types.NamespacedName{{Namespace: ns, Name: name}}
	}
	return more
}

// setCompact stores the set keys of owner in its compact form: the single name in one, the other sets
// in more; an empty set is removed from both.
func setCompact(one map[types.NamespacedName]string, more map[types.NamespacedName][]types.NamespacedName,
	owner types.NamespacedName, keys []types.NamespacedName) {
	name, rest := compactKeys(owner.Namespace, keys)
	if name != "" {
		one[owner] = name
	} else {
		delete(one, owner)
	}
	if rest != nil {
		more[owner] = rest
	} else {
		delete(more, owner)
	}
}

// compareKeys orders keys by namespace, then name.
func compareKeys(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// insertKey adds k to keys, sorted by compareKeys, unless it is there.
func insertKey(keys []types.NamespacedName, k types.NamespacedName) []types.NamespacedName {
	i, found := slices.BinarySearchFunc(keys, k, compareKeys)
	if found {
		return keys
	}
	return slices.Insert(keys, i, k)
}

// removeKey removes k from keys, sorted by compareKeys, if it is there.
func removeKey(keys []types.NamespacedName, k types.NamespacedName) []types.NamespacedName {
	i, found := slices.BinarySearchFunc(keys, k, compareKeys)
	if !found {
		return keys
	}
	return slices.Delete(keys, i, i+1)
}

// hasKey reports whether keys, sorted by compareKeys, hold k.
func hasKey(keys []types.NamespacedName, k types.NamespacedName) bool {
	_, found := slices.BinarySearchFunc(keys, k, compareKeys)
	return found
}

func (s *Syncer) ifReferenced(obj any) []types.NamespacedName {
	k, ok := pipeline.KeyOf(obj)
	if !ok {
		return nil
	}
	if k == s.opts.DefaultCertificate {
		return []types.NamespacedName{k}
	}
	s.mu.Lock()
	used := s.records[k].user != "" || len(s.moreUsers[k]) > 0
	s.mu.Unlock()
	if !used {
		return nil
	}
	return []types.NamespacedName{k}
}

// usersOf returns the accepted Ingresses that reference a Secret, sorted by compareKeys (a copy, as
// ingressChanged edits the index in place), and the Secret's state.
func (s *Syncer) usersOf(k types.NamespacedName) ([]types.NamespacedName, secretState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.usersLocked(k)), s.records[k].state
}

func (s *Syncer) sync(_ context.Context, key types.NamespacedName) error {
	isDefault := key == s.opts.DefaultCertificate
	users, prev := s.usersOf(key)
	known := prev.known()

	if len(users) == 0 && !isDefault {
		if known {
			s.forget(key)
			s.out.Publish(modules.CertChange{Secret: key, Default: isDefault})
			s.log.Info("TLS secret no longer referenced", zap.Stringer("secret", key))
		}
		return nil
	}

	secret, found := s.secrets.Get(key)
	var cert *certs.Certificate
	var reason, problem string
	if !found {
		reason, problem = ReasonSecretNotFound, fmt.Sprintf("TLS secret %s not found; its hosts are served the default certificate", key)
	} else {
		var err error
		cert, err = certs.ParseSecret(secret)
		if err != nil {
			reason, problem = ReasonSecretInvalid, fmt.Sprintf("%v; its hosts are served the default certificate", err)
		}
	}

	if cert == nil {
		if prev.problem() != problem || !known {
			s.log.Warn("TLS secret unusable", zap.Stringer("secret", key), zap.String("reason", problem))
		}
		next := secretState{issues: &issues{problem: problem}}
		s.tell(users, prev, &next, []notice{{reason: reason, message: problem}})
		s.remember(key, next)
		if !known || prev.cert != nil {
			s.out.Publish(modules.CertChange{Secret: key, Default: isDefault})
		}
		return nil
	}

	var notices []notice
	for _, w := range cert.Warnings {
		notices = append(notices, notice{reason: ReasonSecretWarning, message: fmt.Sprintf("TLS secret %s: %s", key, w)})
	}
	if cert.Expired(time.Now()) {
		notices = append(notices, notice{reason: ReasonSecretWarning, message: fmt.Sprintf("TLS secret %s: certificate expired at %s; it is still served", key, cert.NotAfter().Format(time.RFC3339))})
	}
	next := secretState{cert: cert}
	if prev.cert != nil && cert.ContentHash == prev.cert.ContentHash {
		// Nothing to write or publish; an Ingress that started using the Secret may still need telling.
		// The state keeps the published certificate (the one the lane holds), not this equal copy.
		next.cert = prev.cert
		s.tell(users, prev, &next, notices)
		s.remember(key, next)
		return nil
	}
	// The new expiry is scraped from here on, also while the users are told (the state is replaced in one
	// step, so no scrape finds the Secret without its series); then who was told is recorded.
	s.remember(key, next)
	if s.tell(users, prev, &next, notices); next.warned() != nil {
		s.remember(key, next)
	}
	s.log.Info("TLS certificate synced", zap.Stringer("secret", key), zap.Strings("names", cert.Names),
		zap.Time("notAfter", cert.NotAfter()), zap.Stringer("fingerprint", cert.Fingerprint()))
	s.out.Publish(modules.CertChange{Secret: key, Certificate: cert, Default: isDefault})
	return nil
}

// tell puts notices as Warning Events on every user, sorted by compareKeys, that has not had them yet,
// and records them and who has had them in next. Users told about prev's notices are not told again when
// the notices are the same.
func (s *Syncer) tell(users []types.NamespacedName, prev secretState, next *secretState, notices []notice) {
	if len(notices) == 0 {
		return
	}
	prevWarned := prev.warned()
	same := prevWarned != nil && slices.Equal(prevWarned.notices, notices)
	var toldBefore []types.NamespacedName
	if same {
		toldBefore = prevWarned.told
	}
	var told []types.NamespacedName
	for _, u := range users {
		if hasKey(toldBefore, u) {
			told = append(told, u)
			continue
		}
		ing, err := s.ingresses.Ingresses(u.Namespace).Get(u.Name)
		if err != nil {
			continue // gone; its IngressChange drops the reference
		}
		for _, n := range notices {
			s.recorder.Event(ing, corev1.EventTypeWarning, n.reason, n.message)
		}
		told = append(told, u)
	}
	switch {
	case len(told) == 0:
		// next's record of warnings stays nil: notices matter only for whom they were told to, and with
		// nobody told the next sync tells every user either way.
	case same && slices.Equal(told, toldBefore):
		// Nobody new was told (the usual re-sync): keep the previous record instead of a copy of it.
		*next = next.withWarned(prevWarned)
	default:
		*next = next.withWarned(&warned{notices: notices, told: slices.Clip(told)})
	}
}

// remember records a Secret's state (a known one) and keeps the invalid-secrets gauge.
func (s *Syncer) remember(key types.NamespacedName, st secretState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.records[key]
	if rec.state.problem() != "" {
		s.invalidCount--
	}
	rec.state = st
	s.records[key] = rec
	if st.problem() != "" {
		s.invalidCount++
	}
	s.invalid.Set(float64(s.invalidCount))
}

// forget drops a Secret's state, and with it its expiry series; the record goes unless the Secret has
// gained users since its sync began (their IngressChange queued another sync).
func (s *Syncer) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.records[key]; ok {
		if rec.state.problem() != "" {
			s.invalidCount--
		}
		if rec.user == "" && len(s.moreUsers[key]) == 0 {
			delete(s.records, key)
		} else {
			rec.state = secretState{}
			s.records[key] = rec
		}
	}
	s.invalid.Set(float64(s.invalidCount))
}

// expiryCollector exports ingress_reactor_ssl_expire_time_seconds from the syncer's state when scraped:
// a gauge series kept per Secret and name cost about 500 bytes each.
type expiryCollector struct{ s *Syncer }

// Describe implements prometheus.Collector.
func (c expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.s.expire }

// Collect implements prometheus.Collector. It only copies the certificates under the lock, and builds
// and sends the series after unlocking, so a scrape holds up neither a sync nor an Ingress change for
// long.
func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	type published struct {
		secret types.NamespacedName
		cert   *certs.Certificate
	}
	c.s.mu.Lock()
	all := make([]published, 0, len(c.s.records))
	for k, rec := range c.s.records {
		if rec.state.cert != nil {
			all = append(all, published{k, rec.state.cert})
		}
	}
	c.s.mu.Unlock()
	for _, p := range all {
		expiry := float64(p.cert.ExpireTime().Unix())
		for _, name := range p.cert.Names {
			ch <- prometheus.MustNewConstMetric(c.s.expire, prometheus.GaugeValue, expiry, p.secret.Namespace, p.secret.Name, name)
		}
	}
}
