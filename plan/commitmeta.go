package plan

// MaxCommitMetadata is Kafka's default offset.metadata.max.bytes: the
// broker refuses a commit whose metadata is longer
// (OFFSET_METADATA_TOO_LARGE), so a plan whose checkpoints could exceed it
// could never finish.
const MaxCommitMetadata = 4096

// commitMetadataOverhead is the longest metadata replay commits with a
// checkpoint (runner/checkpoint.go) for a plan whose name is empty; the
// name adds its length. A runner test keeps the two in step.
const commitMetadataOverhead = 190

// CommitMetadataSize is the longest commit metadata, in bytes, that a plan
// named name writes with its checkpoints.
func CommitMetadataSize(name string) int { return commitMetadataOverhead + len(name) }

// checkCommitMetadata refuses a name that makes commit metadata exceed
// MaxCommitMetadata.
func (v *validator) checkCommitMetadata(name string) {
	n := CommitMetadataSize(name)
	if n <= MaxCommitMetadata {
		return
	}
	shown := name
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	v.add("name", "%q is %d characters: each checkpoint commit's metadata, which carries the name, would be up to %d bytes, above Kafka's default offset.metadata.max.bytes of %d, and the broker would refuse every commit (OFFSET_METADATA_TOO_LARGE); shorten the name to at most %d characters",
		shown, len(name), n, MaxCommitMetadata, MaxCommitMetadata-commitMetadataOverhead)
}
