package workapply

// Held is an object the agent is removing and cannot be done with yet.
type Held struct {
	// What names the object and what holds it.
	What string
	// Reason is the CleanupBlocked reason.
	Reason string
}
