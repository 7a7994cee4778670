package api

import (
	"errors"
	"math"
	"testing"
)

func TestParseAndFormatUSD(t *testing.T) {
	for _, tc := range []struct {
		in   string
		nano uint64
		out  string
	}{
		{"0.50", 500_000_000, "$0.50"},
		{"$12", 12_000_000_000, "$12.00"},
		{"0.000123", 123_000, "$0.000123"},
		{".5", 500_000_000, "$0.50"},
		{"3.", 3_000_000_000, "$3.00"},
		{"0.000000001", 1, "$0.000000001"},
	} {
		got, err := ParseUSD(tc.in)
		if err != nil || got != tc.nano {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", tc.in, got, err, tc.nano)
		}
		if f := FormatUSD(got); f != tc.out {
			t.Errorf("FormatUSD(%d) = %q, want %q", got, f, tc.out)
		}
	}
	for _, bad := range []string{"", "-1", "+1", "1e3", "0.0000000001", "abc", "1.2.3", "$", "1_000", "99999999999999999999"} {
		if _, err := ParseUSD(bad); !errors.Is(err, ErrUSD) {
			t.Errorf("ParseUSD(%q) = %v, want ErrUSD", bad, err)
		}
	}
}

func TestCost(t *testing.T) {
	p := &Price{Known: true, InputNanoUsd: PerMillion(2.5), OutputNanoUsd: PerMillion(10), CachedInputNanoUsd: PerMillion(1.25)}
	for _, tc := range []struct {
		name            string
		price           *Price
		in, cached, out uint64
		want            uint64
	}{
		{"unknown price", &Price{}, 1000, 0, 1000, 0},
		{"free", &Price{Known: true}, 1000, 0, 1000, 0},
		// 1M input at $2.50 and 1M output at $10.
		{"a million each", p, 1_000_000, 0, 1_000_000, 12_500_000_000},
		// Half the input cached at $1.25.
		{"cached", p, 1_000_000, 500_000, 0, 1_875_000_000},
		// One token at $2.50/M is 2500 nano-USD; at $0.000001/M it rounds up to 1.
		{"rounds up", &Price{Known: true, InputNanoUsd: 1}, 1, 0, 0, 1},
		{"saturates", &Price{Known: true, InputNanoUsd: math.MaxUint64}, math.MaxUint64, 0, 0, math.MaxUint64},
	} {
		if got := Cost(tc.price, tc.in, tc.cached, tc.out); got != tc.want {
			t.Errorf("%s: Cost = %d, want %d", tc.name, got, tc.want)
		}
	}
}
