package plan

import "encoding/json"

// ArgsCacheMax lets tests turn the encoder's cache of kernel arguments off.
var ArgsCacheMax = &argsCacheMax

// MarshalOracle is the plan file as encoding/json writes it in one piece
// (the form EncodeJSON must reproduce byte for byte).
func MarshalOracle(p *Plan) ([]byte, error) {
	out := planJSON{planAlias: (*planAlias)(p), Streams: make([]streamJSON, len(p.Streams))}
	why := p.WaitReasons()
	for i := range p.Streams {
		out.Streams[i] = p.streamJSON(i, why)
	}
	return json.Marshal(out)
}
