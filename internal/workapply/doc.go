// Package workapply is how the work agent applies one Work, as plain values:
// the plan read from the Work's annotations (Plan, For), what to do with each
// manifest given what is on the member (Ownership, Decide), what applying each
// came to (Result), the AppliedWork's records (MergeRecords, DesiredKeys) and
// the Work's status computed from the results (NewWorkStatus, bounded in
// size). It reads and writes nothing: controllers/agent/work carries it out,
// through internal/member, the one writer to the member.
package workapply
