package parquet

import (
	"context"
	"io"
	"os"
)

// builder builds the object of a partition from its frames as Write
// stages them, in a goroutine of its own: reading and staging go on while
// the rows are encoded and compressed, and the object is ready when its
// last frame is staged. It gets exactly the frames the staging file gets,
// in order. The staging file stays the truth: an object whose builder
// failed, or whose staging a crash left behind, is built from the staging
// file (Sink.build).
type builder struct {
	in   chan []byte
	done chan struct{}
	// span is the object's offsets, set by finish.
	span span
	// tmp and info are the built object (tmp at its start) once done is
	// closed, err why it could not be built.
	tmp  *os.File
	info objectInfo
	err  error
}

// builderDepth is how many chunks of frames (each about stageChunk) wait
// for a builder: Write blocks when it falls behind by more.
const builderDepth = 1

// frameBufs recycles the buffers frames are staged in, shared by every
// partition and builder: a partition holds one only while it writes a
// batch, a builder until it has read it. A few are kept (a sync.Pool
// would keep every buffer of a burst until the next GC); one grown past
// twice stageChunk (a batch of large records) is dropped.
var frameBufs = make(chan []byte, 4)

// frameBuf returns an empty buffer for frames.
func frameBuf() []byte {
	select {
	case b := <-frameBufs:
		return b[:0]
	default:
		return make([]byte, 0, stageChunk+stageChunk/4)
	}
}

// recycleFrameBuf gives b back to frameBufs; nothing may use it after.
func recycleFrameBuf(b []byte) {
	if b == nil || cap(b) > 2*stageChunk {
		return
	}
	select {
	case frameBufs <- b:
	default:
	}
}

// startBuilder starts building partition p's next object, of layout
// lay; ctx ends it.
func (s *Sink) startBuilder(ctx context.Context, p int32, lay *layout) *builder {
	b := &builder{in: make(chan []byte, builderDepth), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		src := &chunkReader{in: b.in}
		// The object's span is known once its last frame is staged:
		// finish sets it before it closes b.in, and encode reads it only
		// after reading b.in to its end.
		b.tmp, b.info, b.err = s.encode(ctx, p, src, lay, func() span { return b.span })
		for c := range b.in { // a failed build still takes what is sent
			recycleFrameBuf(c)
		}
	}()
	return b
}

// add hands frames to the builder, which recycles them once read: the
// caller must not use them after.
func (b *builder) add(frames []byte) {
	b.in <- frames
}

// finish waits for the object of span sp built from every frame added,
// at its start in tmp; the caller removes tmp. An error says why it could
// not be built.
func (b *builder) finish(sp span) (*os.File, objectInfo, error) {
	b.span = sp
	close(b.in)
	<-b.done
	return b.tmp, b.info, b.err
}

// discard stops the builder and removes what it built.
func (b *builder) discard() {
	tmp, _, _ := b.finish(span{})
	if tmp != nil {
		tmp.Close()
		os.Remove(tmp.Name())
	}
}

// chunkReader reads the chunks of a channel as one stream, recycling each
// once read.
type chunkReader struct {
	in  <-chan []byte
	cur []byte
	c   []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.c != nil {
			recycleFrameBuf(r.c)
			r.c = nil
		}
		c, ok := <-r.in
		if !ok {
			return 0, io.EOF
		}
		r.c, r.cur = c, c
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// stageChunk is how many bytes of frames Write buffers before it appends
// them to the staging file (and hands them to the builder), and the
// buffer frames are read back through.
const stageChunk = 256 << 10

// maxBuilders is how many objects are built while they are staged at once:
// a second one's memory pushed the heap to its soft limit, slowing runs.
const maxBuilders = 1
