package encode

import "github.com/replay-tool/replay/internal/record"

// AppendJSONLAs is AppendJSONL with the value written in format f; it fails
// with a *record.Error wrapping ErrNotJSON or ErrNotText when f cannot
// write r's value, and appends nothing then.
func AppendJSONLAs(b []byte, r *record.Record, f ValueFormat) ([]byte, error) {
	if err := CheckValueFormat(r, f); err != nil {
		return b, err
	}
	return AppendJSONLChecked(b, r, f), nil
}
