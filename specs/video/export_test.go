package video

// Exp32 exposes exp32 to the tests.
var Exp32 = exp32
