package app

import (
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// NewLogger builds the process logger from --log-level and --log-format and routes klog (client-go's logger) into it.
func NewLogger(c Config) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.logLevel())
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	var enc zapcore.Encoder
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	if c.LogFormat == "console" {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zap.NewAtomicLevelAt(level))
	log := zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(os.Stderr)))
	klog.SetLogger(logr.New(&klogSink{log: log.Named("klog").WithOptions(zap.AddCallerSkip(1))}))
	return log, nil
}

// klogSink adapts zap to logr so client-go's klog output lands in the same structured stream.
// klog verbosity V(n) maps to debug for n > 0, since client-go is chatty at V(2) and above.
type klogSink struct {
	log  *zap.Logger
	name string
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(level int) bool {
	if level > 0 {
		return s.log.Core().Enabled(zapcore.DebugLevel)
	}
	return s.log.Core().Enabled(zapcore.InfoLevel)
}

func (s *klogSink) Info(level int, msg string, kv ...any) {
	if level > 0 {
		s.log.Debug(msg, zap.Any("v", level), fieldsOf(kv))
		return
	}
	s.log.Info(msg, fieldsOf(kv))
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.log.Error(msg, zap.Error(err), fieldsOf(kv))
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{log: s.log.With(fieldsOf(kv)), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	return &klogSink{log: s.log.Named(name), name: name}
}

// fieldsOf turns logr's alternating key/value list into one zap field namespace-free list.
func fieldsOf(kv []any) zap.Field {
	fields := make([]zap.Field, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		fields = append(fields, zap.Any(key, kv[i+1]))
	}
	if len(kv)%2 == 1 {
		fields = append(fields, zap.Any("EXTRA_VALUE", kv[len(kv)-1]))
	}
	return zap.Inline(zapFields(fields))
}

type zapFields []zap.Field

func (fs zapFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, f := range fs {
		f.AddTo(enc)
	}
	return nil
}
