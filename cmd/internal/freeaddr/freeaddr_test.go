package freeaddr

import "testing"

// TestBookHandsOutEachAddressOnce: a port the kernel gives again is not
// handed out twice; the book asks again instead.
func TestBookHandsOutEachAddressOnce(t *testing.T) {
	t.Parallel()
	picks := []string{"127.0.0.1:4001", "127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4001"}
	b := &Book{pick: func() (string, error) {
		if len(picks) == 0 {
			return "127.0.0.1:4001", nil
		}
		p := picks[0]
		picks = picks[1:]
		return p, nil
	}}
	first, err := b.Next()
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Next()
	if err != nil {
		t.Fatal(err)
	}
	if first != "127.0.0.1:4001" || second != "127.0.0.1:4002" {
		t.Errorf("handed out %s then %s, want 127.0.0.1:4001 then 127.0.0.1:4002", first, second)
	}
	// Only ports handed out already: an error, not a third 4001.
	if addr, err := b.Next(); err == nil {
		t.Errorf("handed out %s a second time", addr)
	}
}

// TestZeroBookOnTheKernelsPorts: a Book's zero value hands out distinct
// addresses the kernel found free.
func TestZeroBookOnTheKernelsPorts(t *testing.T) {
	t.Parallel()
	var b Book
	seen := map[string]bool{}
	for range 50 {
		addr, err := b.Next()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("handed out %s twice", addr)
		}
		seen[addr] = true
	}
}
