package canonjson

// Depth is how deeply data's arrays and objects nest, counted by one pass
// over its bytes that builds nothing: a [ or { outside a string opens a
// level, a ] or } closes one. It stops as soon as the count passes limit
// and returns limit+1, so a body of thousands of levels costs no more
// than one of limit. It does not validate: a body it measures may still
// be refused by Decode.
func Depth(data []byte, limit int) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
