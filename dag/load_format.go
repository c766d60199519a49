package dag

// The spec format as data (Format), from the loader's field tables, for
// tools that generate a schema of specs or editor completion.

// FormatMapping describes one mapping of the spec format (docs/spec.md):
// its fields in the order WriteYAML writes them. Format returns them all,
// for tools that generate a schema of specs or editor completion.
type FormatMapping struct {
	Name   string // "spec", "options", "buffer", "kernel", "param", "stage", "stream", "capture", "access", "wait", "init"
	Fields []FormatField
	// OneOf: exactly one of the fields is given (init); otherwise any subset
	// with the Required ones.
	OneOf bool
}

// FormatField describes one field of a mapping.
type FormatField struct {
	Key      string
	Required bool
	// Type is one of: "integer", "number" (finite), "string", "name" (a
	// name: no spaces, brackets, commas or control characters), "enum"
	// (one of Enum), "boolean" (true or false), "list" (of Items), "mapping" (the mapping named
	// Items), "args" (a mapping of names to numbers or strings), or an
	// either-form: "name|mapping" (a name or the mapping named Items),
	// "access" (a buffer name, "name[a:b]", or the access mapping),
	// "integer|auto", "integer|auto|none", "zeros|mapping" (the string zeros or the init mapping).
	Type  string
	Items string   // for list: the items' Type, or a mapping's name; for mapping forms: the mapping's name
	Enum  []string // for enum, and list of enum
	// Min and Max bound integers and numbers (inclusive) when HasMin/HasMax.
	Min, Max       float64
	HasMin, HasMax bool
	Doc            string // one line, in the terms of docs/spec.md
}

// Format returns the mappings of the spec format as the loader's tables
// declare them (the same tables Load decodes with), in a fixed order:
// spec, options, buffer, init, kernel, param, stage, go-kernel, stream,
// capture, access, wait.
func Format() []FormatMapping {
	return []FormatMapping{
		{Name: "spec", Fields: schemaOf(specTable)},
		{Name: "options", Fields: schemaOf(optionsTable)},
		{Name: "buffer", Fields: schemaOf(bufferTable)},
		{Name: "init", OneOf: true, Fields: []FormatField{
			{Key: InitFill, Type: "number", Doc: "every float32 element has this value"},
			{Key: InitFile, Type: "string", Doc: "raw bytes of this file (relative to the spec's folder), exactly the buffer's size"},
			{Key: InitRandom, Type: "integer", Doc: "bytes from a PRNG with this seed"},
		}},
		{Name: "kernel", Fields: schemaOf(kernelTable)},
		{Name: "param", Fields: []FormatField{
			{Key: "name", Required: true, Type: "name"},
			{Key: "type", Required: true, Type: "enum", Enum: paramTypes},
		}},
		{Name: "stage", Fields: schemaOf(stageTable)},
		{Name: "go-kernel", Fields: []FormatField{
			{Key: "go", Required: true, Type: "name", Doc: "the Go function's name in RunOptions.Funcs"},
		}},
		{Name: "stream", Fields: schemaOf(streamTable)},
		{Name: "capture", Fields: schemaOf(captureTable)},
		{Name: "access", Fields: []FormatField{
			{Key: "buffer", Required: true, Type: "name", Doc: "the buffer"},
			{Key: "offset", Type: "integer", Min: 0, HasMin: true, Doc: "first byte"},
			{Key: "bytes", Type: "integer", Min: 1, HasMin: true, Doc: "length in bytes; absent: to the end of the buffer"},
		}},
		{Name: "wait", Fields: []FormatField{
			{Key: "stage", Type: "name", Doc: "wait for this stage's record (exactly one of stage and event)"},
			{Key: "event", Type: "name", Doc: "wait for the latest record of this event"},
			{Key: "lag", Type: "integer", Min: 0, Max: maxLag, HasMin: true, HasMax: true, Doc: "the record of this many iterations back"},
		}},
	}
}

func schemaOf[T, S any](table []field[T, S]) []FormatField {
	out := make([]FormatField, len(table))
	for i, f := range table {
		out[i] = f.schema
		out[i].Key, out[i].Required = f.key, f.need != ""
	}
	return out
}
