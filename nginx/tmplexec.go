package nginx

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/template/parse"
)

// This file executes nginx.conf templates. The syntax is Go's text/template (parsed by its parse
// package), executed here rather than by text/template because text/template looks methods up by name
// at run time: the linker then keeps every exported method of every type in the binary, which doubled
// the controller's size (116 MB instead of 57 MB) and added about 20 MiB of mapped executable to its
// memory. Templates read fields (of structs, and of maps by key), variables and constants, and call the
// builtin functions below; they do not call methods, which the view types do not need: every value a
// template prints is prepared in the view (see view).

// tmplFuncNames are the functions templates may call (see tmplLookup), for the parser.
var tmplFuncNames = []string{"and", "or", "not", "len", "index", "eq", "ne", "lt", "le", "gt", "ge", "print", "println", "printf"}

// tmplLookup returns the function a template names, with text/template's meaning, or nil. (A switch,
// not a map: the embedded template is parsed and rendered while package variables are initialized.)
func tmplLookup(name string) tmplFunc {
	ordered := func(op string) tmplFunc {
		return func(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
			return tmplOrdered(s, dot, args, final, op)
		}
	}
	switch name {
	case "and":
		return tmplAnd
	case "or":
		return tmplOr
	case "not":
		return tmplNot
	case "len":
		return tmplLen
	case "index":
		return tmplIndex
	case "eq":
		return tmplEq
	case "ne":
		return tmplNe
	case "lt", "le", "gt", "ge":
		return ordered(name)
	case "print":
		return tmplPrint(fmt.Sprint)
	case "println":
		return tmplPrint(fmt.Sprintln)
	case "printf":
		return tmplPrintf
	}
	return nil
}

// tmplFunc evaluates a call; args are unevaluated (and and or stop at the first deciding one), final is
// the value piped into the call, if any.
type tmplFunc func(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error)

// maxTemplateDepth bounds nested {{template}} calls, so that a template calling itself fails cleanly.
const maxTemplateDepth = 100

// tmplSet is a parsed template with its {{define}}d templates.
type tmplSet struct {
	name  string
	trees map[string]*parse.Tree
}

func parseTmplSet(name, text string) (*tmplSet, error) {
	names := make(map[string]any, len(tmplFuncNames))
	for _, n := range tmplFuncNames {
		names[n] = true
	}
	trees, err := parse.Parse(name, text, "", "", names)
	if err != nil {
		return nil, err
	}
	if trees[name] == nil {
		trees[name] = &parse.Tree{Name: name, Root: &parse.ListNode{}}
	}
	return &tmplSet{name: name, trees: trees}, nil
}

// execute writes the template with data as its dot and $.
func (t *tmplSet) execute(w *bytes.Buffer, data any) error {
	s := &tmplState{set: t, w: w, tree: t.trees[t.name], steps: new(int)}
	root := reflect.ValueOf(data)
	s.vars = []tmplVar{{"$", root}}
	_, err := s.walk(root, s.tree.Root)
	return err
}

type tmplVar struct {
	name  string
	value reflect.Value
}

type tmplState struct {
	set   *tmplSet
	w     *bytes.Buffer
	tree  *parse.Tree
	vars  []tmplVar
	depth int
	// steps counts the elements walked in this execution, nested templates included.
	steps *int
}

// maxTemplateSteps and maxTemplateOutput bound one execution: a --template that loops for ever, or
// calls itself twice at every level, fails with an error instead of holding the renderer. The embedded
// template takes a few thousand steps and writes tens of KB.
const (
	maxTemplateSteps  = 1_000_000
	maxTemplateOutput = 32 << 20
)

// flow is what a walk ended with: the end of its list, or a {{break}} or {{continue}}.
type flow int

const (
	flowNext flow = iota
	flowBreak
	flowContinue
)

// errorf names the template position of node.
func (s *tmplState) errorf(node parse.Node, format string, args ...any) error {
	loc, ctx := s.tree.ErrorContext(node)
	return fmt.Errorf("template: %s: executing %q at <%s>: %s", loc, s.tree.Name, ctx, fmt.Sprintf(format, args...))
}

func (s *tmplState) walk(dot reflect.Value, node parse.Node) (flow, error) {
	if *s.steps++; *s.steps > maxTemplateSteps {
		return flowNext, s.errorf(node, "the template takes more than %d steps", maxTemplateSteps)
	}
	if s.w.Len() > maxTemplateOutput {
		return flowNext, s.errorf(node, "the template writes more than %d MB", maxTemplateOutput>>20)
	}
	switch n := node.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			if f, err := s.walk(dot, c); err != nil || f != flowNext {
				return f, err
			}
		}
	case *parse.TextNode:
		s.w.Write(n.Text)
	case *parse.CommentNode:
	case *parse.ActionNode:
		v, err := s.pipeline(dot, n.Pipe)
		if err != nil {
			return flowNext, err
		}
		if len(n.Pipe.Decl) == 0 {
			return flowNext, s.print(n, v)
		}
	case *parse.IfNode:
		return s.conditional(dot, &n.BranchNode, false)
	case *parse.WithNode:
		return s.conditional(dot, &n.BranchNode, true)
	case *parse.RangeNode:
		return s.rangeOver(dot, n)
	case *parse.TemplateNode:
		return flowNext, s.call(dot, n)
	case *parse.BreakNode:
		return flowBreak, nil
	case *parse.ContinueNode:
		return flowContinue, nil
	default:
		return flowNext, s.errorf(node, "unsupported template element %s", node)
	}
	return flowNext, nil
}

// conditional runs {{if}} (with: false) or {{with}}: the list when the pipeline's value is true, else
// the else list. Variables declared inside end with it.
func (s *tmplState) conditional(dot reflect.Value, b *parse.BranchNode, with bool) (flow, error) {
	mark := len(s.vars)
	defer func() { s.vars = s.vars[:mark] }()
	v, err := s.pipeline(dot, b.Pipe)
	if err != nil {
		return flowNext, err
	}
	if tmplTruth(v) {
		if with {
			dot = v
		}
		return s.walk(dot, b.List)
	}
	if b.ElseList != nil {
		return s.walk(dot, b.ElseList)
	}
	return flowNext, nil
}

func (s *tmplState) rangeOver(dot reflect.Value, r *parse.RangeNode) (flow, error) {
	mark := len(s.vars)
	defer func() { s.vars = s.vars[:mark] }()
	// The declared variables first take the pipeline's value (the else branch sees them so), then each
	// element. The tree is shared by concurrent renders: it is read, never changed.
	decl := r.Pipe.Decl
	v, err := s.pipeline(dot, r.Pipe)
	if err != nil {
		return flowNext, err
	}
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() == reflect.Pointer { // a nil pointer is an error, as in text/template; a nil interface ranges over nothing
		return flowNext, s.errorf(r, "range can't iterate over %v", v)
	}
	v = tmplIndirect(v)
	// {{range $k, $v = ...}} sets variables declared before; with :=, the pipeline pushed them at first.
	assign := r.Pipe.IsAssign
	body, first := len(s.vars), len(s.vars)-len(decl)
	one := func(key, elem reflect.Value) (bool, error) {
		s.vars = s.vars[:body]
		vals := []reflect.Value{elem}
		if len(decl) == 2 {
			vals = []reflect.Value{key, elem}
		}
		for i, d := range decl {
			if !assign {
				s.vars[first+i].value = vals[i]
			} else if err := s.setVar(d, vals[i]); err != nil {
				return false, err
			}
		}
		f, err := s.walk(elem, r.List)
		return f == flowBreak, err
	}
	n := 0
	switch v.Kind() {
	case reflect.Slice, reflect.Array, reflect.String:
		if v.Kind() == reflect.String {
			return flowNext, s.errorf(r, "range over a string is not supported")
		}
		n = v.Len()
		for i := range n {
			if stop, err := one(reflect.ValueOf(i), v.Index(i)); err != nil || stop {
				return flowNext, err
			}
		}
	case reflect.Map:
		n = v.Len()
		keys, err := tmplSortedKeys(v)
		if err != nil {
			return flowNext, s.errorf(r, "%v", err)
		}
		for _, k := range keys {
			if stop, err := one(k, v.MapIndex(k)); err != nil || stop {
				return flowNext, err
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if len(decl) > 1 {
			return flowNext, s.errorf(r, "can't use %v to iterate over more than one variable", v)
		}
		for i := range v.Seq() { // 0 to v-1, of v's type
			n++
			if stop, err := one(reflect.Value{}, i); err != nil || stop {
				return flowNext, err
			}
		}
	case reflect.Invalid:
	default:
		return flowNext, s.errorf(r, "range can't iterate over %s", v.Type())
	}
	if n <= 0 && r.ElseList != nil {
		s.vars = s.vars[:body]
		return s.walk(dot, r.ElseList)
	}
	return flowNext, nil
}

func tmplSortedKeys(m reflect.Value) ([]reflect.Value, error) {
	keys := m.MapKeys()
	if len(keys) == 0 {
		return keys, nil
	}
	var err error
	slices.SortFunc(keys, func(a, b reflect.Value) int {
		if a.Kind() == reflect.Bool { // false first, as fmt and text/template print them
			return cmp.Compare(tmplBit(a.Bool()), tmplBit(b.Bool()))
		}
		c, e := tmplCompare(a, b)
		if e != nil {
			err = e
		}
		return c
	})
	if err != nil {
		return nil, fmt.Errorf("range over a map needs ordered keys: %w", err)
	}
	return keys, nil
}

func tmplBit(b bool) int {
	if b {
		return 1
	}
	return 0
}

// call runs {{template "name" pipeline}}: the named template with the pipeline's value as dot and $.
func (s *tmplState) call(dot reflect.Value, n *parse.TemplateNode) error {
	t := s.set.trees[n.Name]
	if t == nil {
		return s.errorf(n, "no such template %q", n.Name)
	}
	if s.depth >= maxTemplateDepth {
		return s.errorf(n, "templates nested more than %d deep", maxTemplateDepth)
	}
	var v reflect.Value
	if n.Pipe != nil {
		var err error
		if v, err = s.pipeline(dot, n.Pipe); err != nil {
			return err
		}
	}
	inner := &tmplState{set: s.set, w: s.w, tree: t, vars: []tmplVar{{"$", v}}, depth: s.depth + 1, steps: s.steps}
	_, err := inner.walk(v, t.Root)
	return err
}

// pipeline evaluates a pipeline: each command's value goes as the last argument into the next. Declared
// variables are pushed, assigned ones set.
func (s *tmplState) pipeline(dot reflect.Value, p *parse.PipeNode) (reflect.Value, error) {
	var v reflect.Value
	for i, c := range p.Cmds {
		var final *reflect.Value
		if i > 0 {
			prev := v
			final = &prev
		}
		var err error
		if v, err = s.command(dot, c, final); err != nil {
			return reflect.Value{}, err
		}
		// A value in an empty interface is the value it holds (a nil one is no value), for if, with,
		// range and printing alike.
		if v.Kind() == reflect.Interface && v.Type().NumMethod() == 0 {
			v = v.Elem()
		}
	}
	for _, d := range p.Decl {
		if p.IsAssign {
			if err := s.setVar(d, v); err != nil {
				return reflect.Value{}, err
			}
		} else {
			s.vars = append(s.vars, tmplVar{d.Ident[0], v})
		}
	}
	return v, nil
}

func (s *tmplState) setVar(d *parse.VariableNode, v reflect.Value) error {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == d.Ident[0] {
			s.vars[i].value = v
			return nil
		}
	}
	return s.errorf(d, "undefined variable %s", d.Ident[0])
}

func (s *tmplState) command(dot reflect.Value, c *parse.CommandNode, final *reflect.Value) (reflect.Value, error) {
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
		return s.function(dot, id, c.Args[1:], final)
	}
	if len(c.Args) > 1 || final != nil {
		return reflect.Value{}, s.errorf(c, "%s is not a function and takes no arguments (templates do not call methods)", c.Args[0])
	}
	if _, ok := c.Args[0].(*parse.NilNode); ok {
		return reflect.Value{}, s.errorf(c, "nil is not a command")
	}
	return s.arg(dot, c.Args[0])
}

func (s *tmplState) function(dot reflect.Value, id *parse.IdentifierNode, args []parse.Node, final *reflect.Value) (v reflect.Value, err error) {
	f := tmplLookup(id.Ident)
	if f == nil {
		return reflect.Value{}, s.errorf(id, "function %q not defined", id.Ident)
	}
	// reflect panics on what the functions cannot check beforehand (== on structs that hold slices in
	// interfaces, a map key that cannot be hashed); a template must not end the controller.
	defer func() {
		if p := recover(); p != nil {
			v, err = reflect.Value{}, s.errorf(id, "error calling %s: %v", id.Ident, p)
		}
	}()
	v, err = f(s, dot, args, final)
	if err != nil {
		var te tmplError
		if errors.As(err, &te) {
			return reflect.Value{}, err
		}
		return reflect.Value{}, s.errorf(id, "error calling %s: %v", id.Ident, err)
	}
	return v, nil
}

// tmplError is an error that already names its position.
type tmplError struct{ error }

// arg evaluates one argument of a command.
func (s *tmplState) arg(dot reflect.Value, n parse.Node) (reflect.Value, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.NilNode:
		return reflect.Value{}, nil
	case *parse.FieldNode:
		return s.fields(n, dot, n.Ident)
	case *parse.VariableNode:
		for i := len(s.vars) - 1; i >= 0; i-- {
			if s.vars[i].name == n.Ident[0] {
				return s.fields(n, s.vars[i].value, n.Ident[1:])
			}
		}
		return reflect.Value{}, s.errorf(n, "undefined variable %s", n.Ident[0])
	case *parse.ChainNode:
		base, err := s.arg(dot, n.Node)
		if err != nil {
			return reflect.Value{}, err
		}
		return s.fields(n, base, n.Field)
	case *parse.PipeNode:
		// Its variables live to the end of the enclosing block, as the parser scopes them.
		return s.pipeline(dot, n)
	case *parse.IdentifierNode:
		return s.function(dot, n, nil, nil)
	case *parse.StringNode:
		return reflect.ValueOf(n.Text), nil
	case *parse.BoolNode:
		return reflect.ValueOf(n.True), nil
	case *parse.NumberNode:
		// A constant written as a float (a '.', an exponent) is a float even when its value is whole; a
		// character constant ('e') and an unsigned hexadecimal one (0x1e) are integers, but a signed
		// hexadecimal one with an 'e' among its digits (-0x1e) is a float, as text/template has it.
		hexInt := strings.HasPrefix(strings.ToLower(n.Text), "0x") && !strings.ContainsAny(n.Text, "pP")
		written := !strings.HasPrefix(n.Text, "'") && !hexInt && strings.ContainsAny(n.Text, ".eEpP")
		switch {
		case n.IsComplex:
			return reflect.ValueOf(n.Complex128), nil
		case n.IsFloat && written:
			return reflect.ValueOf(n.Float64), nil
		case n.IsInt:
			return reflect.ValueOf(int(n.Int64)), nil
		}
		return reflect.Value{}, s.errorf(n, "%s overflows int", n.Text)
	}
	return reflect.Value{}, s.errorf(n, "can't evaluate %s", n)
}

// fields follows a chain of field names from v: struct fields (exported), and map entries by key, which
// must exist.
func (s *tmplState) fields(node parse.Node, v reflect.Value, names []string) (reflect.Value, error) {
	for _, name := range names {
		v = tmplIndirect(v)
		switch v.Kind() {
		case reflect.Struct:
			f, ok := v.Type().FieldByName(name)
			if !ok || !f.IsExported() {
				return reflect.Value{}, s.errorf(node, "can't evaluate field %s in type %s (templates read exported fields, not methods)", name, v.Type())
			}
			var err error
			if v, err = v.FieldByIndexErr(f.Index); err != nil { // through a nil embedded pointer
				return reflect.Value{}, s.errorf(node, "%v", err)
			}
		case reflect.Map:
			key := reflect.ValueOf(name)
			switch kt := v.Type().Key(); {
			case kt.Kind() == reflect.String:
				key = key.Convert(kt)
			case !key.Type().AssignableTo(kt): // an interface that strings satisfy is fine
				return reflect.Value{}, s.errorf(node, "can't evaluate field %s in a map of %s keys", name, kt)
			}
			e := v.MapIndex(key)
			if !e.IsValid() {
				return reflect.Value{}, s.errorf(node, "map has no entry for key %q", name)
			}
			v = e
		case reflect.Invalid:
			return reflect.Value{}, s.errorf(node, "nil data; no entry for key %q", name)
		default:
			return reflect.Value{}, s.errorf(node, "can't evaluate field %s in type %s", name, v.Type())
		}
	}
	return v, nil
}

// print writes an action's value as fmt.Fprint does, through pointers (and the interfaces they lead
// to); no value (a nil empty interface included: pipeline took it out) prints "<no value>", a nil
// pointer or a nil interface reached otherwise "<nil>".
func (s *tmplState) print(n parse.Node, v reflect.Value) error {
	if v.Kind() == reflect.Pointer { // to the value, or to the nil pointer or interface on the way
		for (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && !v.IsNil() {
			v = v.Elem()
		}
	}
	if !v.IsValid() {
		s.w.WriteString("<no value>")
		return nil
	}
	switch v.Kind() {
	case reflect.Chan, reflect.Func:
		return s.errorf(n, "can't print a value of type %s", v.Type())
	}
	fmt.Fprint(s.w, v.Interface())
	return nil
}

// tmplIndirect follows pointers and interfaces to the value they hold; a nil one gives no value.
func tmplIndirect(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// tmplTruth is text/template's truth: false, 0, "", an empty slice or map, nil and no value are false.
func tmplTruth(v reflect.Value) bool {
	v = tmplIndirectIface(v)
	switch v.Kind() {
	case reflect.Invalid:
		return false
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() != 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() != 0
	case reflect.Float32, reflect.Float64:
		return v.Float() != 0
	case reflect.Complex64, reflect.Complex128:
		return v.Complex() != 0
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array, reflect.Chan:
		return v.Len() > 0
	case reflect.Pointer, reflect.Interface, reflect.Func:
		return !v.IsNil()
	}
	return true
}

// values evaluates all arguments and the piped value.
func (s *tmplState) values(dot reflect.Value, args []parse.Node, final *reflect.Value) ([]reflect.Value, error) {
	out := make([]reflect.Value, 0, len(args)+1)
	for _, a := range args {
		v, err := s.arg(dot, a)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if final != nil {
		out = append(out, *final)
	}
	return out, nil
}

// tmplAnd and tmplOr return the first argument that decides (false for and, true for or), else the
// last; later arguments are not evaluated.
func tmplAnd(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	return tmplShortCircuit(s, dot, args, final, false)
}

func tmplOr(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	return tmplShortCircuit(s, dot, args, final, true)
}

func tmplShortCircuit(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value, stopAt bool) (reflect.Value, error) {
	n := len(args)
	if final != nil {
		n++
	}
	if n == 0 {
		return reflect.Value{}, errors.New("wrong number of args: want at least 1 got 0")
	}
	var v reflect.Value
	for i := range n {
		if i < len(args) {
			var err error
			if v, err = s.arg(dot, args[i]); err != nil {
				return reflect.Value{}, tmplError{err}
			}
		} else {
			v = *final
		}
		if tmplTruth(v) == stopAt {
			return v, nil
		}
	}
	return v, nil
}

func tmplNot(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	vs, err := s.exactly(dot, args, final, 1)
	if err != nil {
		return reflect.Value{}, err
	}
	return reflect.ValueOf(!tmplTruth(vs[0])), nil
}

// exactly evaluates the arguments and checks their number.
func (s *tmplState) exactly(dot reflect.Value, args []parse.Node, final *reflect.Value, want int) ([]reflect.Value, error) {
	vs, err := s.values(dot, args, final)
	if err != nil {
		return nil, tmplError{err}
	}
	if len(vs) != want {
		return nil, fmt.Errorf("wrong number of args: want %d got %d", want, len(vs))
	}
	return vs, nil
}

func tmplLen(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	vs, err := s.exactly(dot, args, final, 1)
	if err != nil {
		return reflect.Value{}, err
	}
	v := tmplIndirect(vs[0])
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Array, reflect.Map, reflect.Chan:
		return reflect.ValueOf(v.Len()), nil
	case reflect.Invalid:
		return reflect.Value{}, errors.New("len of nil")
	}
	return reflect.Value{}, fmt.Errorf("len of type %s", v.Type())
}

func tmplIndex(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	vs, err := s.values(dot, args, final)
	if err != nil {
		return reflect.Value{}, tmplError{err}
	}
	if len(vs) == 0 {
		return reflect.Value{}, errors.New("wrong number of args: want at least 1 got 0")
	}
	v := vs[0]
	if !tmplIndirectIface(v).IsValid() {
		return reflect.Value{}, errors.New("index of untyped nil")
	}
	for _, k := range vs[1:] {
		v = tmplIndirect(v)
		switch v.Kind() {
		case reflect.Slice, reflect.Array, reflect.String:
			i, ok := tmplInt(k)
			if !ok {
				return reflect.Value{}, errors.New("index must be an integer")
			}
			if i < 0 || i >= int64(v.Len()) {
				return reflect.Value{}, fmt.Errorf("index out of range: %d", i)
			}
			v = v.Index(int(i))
		case reflect.Map:
			k = tmplIndirect(k)
			key := v.Type().Key()
			if k.IsValid() && !k.Type().AssignableTo(key) && tmplIntLike(k.Kind()) && tmplIntLike(key.Kind()) {
				k = k.Convert(key) // {{index .M 2}} on a map of int64 keys, as text/template allows
			}
			if !k.IsValid() || !k.Type().AssignableTo(key) {
				return reflect.Value{}, fmt.Errorf("map key of the wrong type for %s", v.Type())
			}
			if e := v.MapIndex(k); e.IsValid() {
				v = e
			} else {
				v = reflect.Zero(v.Type().Elem())
			}
		case reflect.Invalid:
			return reflect.Value{}, errors.New("index of untyped nil")
		default:
			return reflect.Value{}, fmt.Errorf("can't index item of type %s", v.Type())
		}
	}
	return v, nil
}

func tmplIntLike(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Uintptr
}

func tmplInt(v reflect.Value) (int64, bool) {
	v = tmplIndirect(v)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Uint() > 1<<62 {
			return 0, false
		}
		return int64(v.Uint()), true
	}
	return 0, false
}

// tmplKind groups kinds for comparison.
type tmplKind int

const (
	kindOther tmplKind = iota
	kindBool
	kindInt
	kindUint
	kindFloat
	kindString
	kindComplex
)

func tmplKindOf(v reflect.Value) tmplKind {
	switch v.Kind() {
	case reflect.Bool:
		return kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kindInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return kindUint
	case reflect.Float32, reflect.Float64:
		return kindFloat
	case reflect.String:
		return kindString
	}
	return kindOther
}

var errIncomparable = errors.New("incompatible types for comparison")

// tmplCompare orders two basic values: booleans, numbers (a signed and an unsigned integer compare by
// value), strings.
func tmplCompare(a, b reflect.Value) (int, error) {
	ka, kb := tmplKindOf(a), tmplKindOf(b)
	switch {
	case ka == kindInt && kb == kindUint:
		if a.Int() < 0 {
			return -1, nil
		}
		return cmp.Compare(uint64(a.Int()), b.Uint()), nil
	case ka == kindUint && kb == kindInt:
		if b.Int() < 0 {
			return 1, nil
		}
		return cmp.Compare(a.Uint(), uint64(b.Int())), nil
	case ka != kb:
		return 0, errIncomparable
	}
	switch ka {
	case kindBool:
		if a.Bool() == b.Bool() {
			return 0, nil
		}
		return 0, errors.New("booleans are not ordered")
	case kindInt:
		return cmp.Compare(a.Int(), b.Int()), nil
	case kindUint:
		return cmp.Compare(a.Uint(), b.Uint()), nil
	case kindFloat:
		return cmp.Compare(a.Float(), b.Float()), nil
	case kindString:
		return cmp.Compare(a.String(), b.String()), nil
	}
	return 0, fmt.Errorf("invalid type for comparison: %s", a.Type())
}

// tmplEqual is eq for two values, as text/template has it: basic values by value (a signed and an
// unsigned integer too), nil (no value, or a nil pointer, slice, map or interface) equal to nil, other
// values of one kind with ==. A basic value and no value are unequal, not an error.
func tmplEqual(a, b reflect.Value) (bool, error) {
	a, b = tmplIndirectIface(a), tmplIndirectIface(b)
	ka, kb := tmplBasicKind(a), tmplBasicKind(b)
	if ka != kb {
		switch {
		case ka == kindInt && kb == kindUint, ka == kindUint && kb == kindInt:
			c, _ := tmplCompare(a, b)
			return c == 0, nil
		case a.IsValid() && b.IsValid():
			return false, errIncomparable
		}
		return false, nil
	}
	switch ka {
	case kindBool:
		return a.Bool() == b.Bool(), nil
	case kindInt:
		return a.Int() == b.Int(), nil
	case kindUint:
		return a.Uint() == b.Uint(), nil
	case kindFloat:
		return a.Float() == b.Float(), nil // NaN equals nothing
	case kindString:
		return a.String() == b.String(), nil
	case kindComplex:
		return a.Complex() == b.Complex(), nil
	}
	if a.Kind() != b.Kind() && a.IsValid() && b.IsValid() {
		return false, fmt.Errorf("non-comparable types %s and %s", a.Type(), b.Type())
	}
	if tmplNil(a) || tmplNil(b) {
		return tmplNil(a) == tmplNil(b), nil
	}
	if a.Type() != b.Type() {
		return false, errIncomparable
	}
	if !a.Type().Comparable() {
		return false, fmt.Errorf("non-comparable type %s", a.Type())
	}
	return a.Equal(b), nil // panics on interfaces that hold incomparable values: function recovers
}

// tmplBasicKind is tmplKindOf with complex numbers, and kindOther for no value too.
func tmplBasicKind(v reflect.Value) tmplKind {
	if v.Kind() == reflect.Complex64 || v.Kind() == reflect.Complex128 {
		return kindComplex
	}
	return tmplKindOf(v)
}

// tmplNil says whether v is no value or a nil pointer, slice, map, interface, channel or function.
func tmplNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Invalid:
		return true
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return v.IsNil()
	}
	return false
}

func tmplIndirectIface(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

func tmplEq(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	vs, err := s.values(dot, args, final)
	if err != nil {
		return reflect.Value{}, tmplError{err}
	}
	if len(vs) < 2 {
		return reflect.Value{}, errors.New("missing argument for comparison")
	}
	for _, b := range vs[1:] {
		eq, err := tmplEqual(vs[0], b)
		if err != nil {
			return reflect.Value{}, err
		}
		if eq {
			return reflect.ValueOf(true), nil
		}
	}
	return reflect.ValueOf(false), nil
}

func tmplNe(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	vs, err := s.exactly(dot, args, final, 2)
	if err != nil {
		return reflect.Value{}, err
	}
	eq, err := tmplEqual(vs[0], vs[1])
	return reflect.ValueOf(!eq), err
}

// tmplOrdered is lt, le, gt and ge, as text/template defines them: le is lt or eq, gt is not le, ge is
// not lt (so that with NaN, gt and ge are true where lt and le are false).
func tmplOrdered(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value, op string) (reflect.Value, error) {
	vs, err := s.exactly(dot, args, final, 2)
	if err != nil {
		return reflect.Value{}, err
	}
	a, b := tmplIndirectIface(vs[0]), tmplIndirectIface(vs[1])
	if tmplKindOf(a) == kindOther || tmplKindOf(b) == kindOther || tmplKindOf(a) == kindBool {
		return reflect.Value{}, errors.New("invalid type for comparison")
	}
	var less bool
	if tmplKindOf(a) == kindFloat && tmplKindOf(b) == kindFloat {
		less = a.Float() < b.Float() // false with NaN, where cmp.Compare orders NaN first
	} else {
		c, err := tmplCompare(a, b)
		if err != nil {
			return reflect.Value{}, err
		}
		less = c < 0
	}
	lessOrEqual := less
	if !less {
		if lessOrEqual, err = tmplEqual(a, b); err != nil {
			return reflect.Value{}, err
		}
	}
	switch op {
	case "lt":
		return reflect.ValueOf(less), nil
	case "le":
		return reflect.ValueOf(lessOrEqual), nil
	case "gt":
		return reflect.ValueOf(!lessOrEqual), nil
	}
	return reflect.ValueOf(!less), nil
}

// tmplInterfaces turns evaluated arguments into what fmt takes; no value is nil.
func tmplInterfaces(vs []reflect.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		if v.IsValid() {
			out[i] = v.Interface()
		}
	}
	return out
}

func tmplPrint(f func(...any) string) tmplFunc {
	return func(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
		vs, err := s.values(dot, args, final)
		if err != nil {
			return reflect.Value{}, tmplError{err}
		}
		return reflect.ValueOf(f(tmplInterfaces(vs)...)), nil
	}
}

func tmplPrintf(s *tmplState, dot reflect.Value, args []parse.Node, final *reflect.Value) (reflect.Value, error) {
	vs, err := s.values(dot, args, final)
	if err != nil {
		return reflect.Value{}, tmplError{err}
	}
	if len(vs) == 0 || tmplKindOf(tmplIndirectIface(vs[0])) != kindString {
		return reflect.Value{}, errors.New("printf needs a format string first")
	}
	return reflect.ValueOf(fmt.Sprintf(tmplIndirectIface(vs[0]).String(), tmplInterfaces(vs[1:])...)), nil
}
