package models

import "testing"

func TestPickerTopP(t *testing.T) {
	logits := []float32{0.1, 2, 0.5, 1.9, -1}
	// A nucleus of 1% keeps only the most likely token, whatever the draw.
	pk, err := NewPicker(SampleConfig{Temperature: 1, TopP: 0.01, Seed: 3}, len(logits))
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if got := pk.Pick(logits); got != 1 {
			t.Fatalf("top-p 0.01 picked %d, want 1", got)
		}
	}
	// Without top-p the same stream draws other tokens too (control).
	pk, _ = NewPicker(SampleConfig{Temperature: 1, Seed: 3}, len(logits))
	seen := map[int32]bool{}
	for range 50 {
		seen[pk.Pick(logits)] = true
	}
	if len(seen) < 2 {
		t.Fatalf("temperature 1 drew only %v", seen)
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := NewPicker(SampleConfig{TopP: bad}, 5); err == nil {
			t.Errorf("top-p %v accepted", bad)
		}
	}
}
