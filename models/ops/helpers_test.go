package ops

// prod is the number of elements of shape s.
func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}
