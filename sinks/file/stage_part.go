package file

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/replay-tool/replay/internal/record"
)

// partStager stages each partition in its own file, partition-N.jsonl;
// see Sink.
type partStager struct {
	stagedParts
	enc encoder
}

func (st *partStager) file(p int32) string {
	return filepath.Join(st.dir, fmt.Sprintf("partition-%d.jsonl", p))
}

func (st *partStager) setFloor(int64) {} // a partition's file is cut at its last complete line

func (st *partStager) open(p int32) (*filePart, error) {
	f, _, err := createStagingFile(st.file(p))
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	fp := &filePart{f: f, next: -1}
	if err := recoverPart(fp); err != nil {
		f.Close()
		return nil, fmt.Errorf("file sink: recover %s: %w", st.file(p), err)
	}
	st.parts[p] = fp
	return fp, nil
}

func (st *partStager) write(fp *filePart, batch []record.Record) error {
	if fp.next > batch[0].Offset { // re-delivery: drop what will be written again
		end, last, err := scanLines(fp.f, batch[0].Offset)
		if err == nil {
			err = fp.f.Truncate(end)
		}
		if err != nil {
			return fmt.Errorf("file sink: rewind partition %d: %w", batch[0].Partition, err)
		}
		fp.size, fp.next = end, last+1
	}
	if err := st.enc.encode(&fp.lb, batch); err != nil {
		return err
	}
	if _, err := fp.f.WriteAt(fp.lb.buf, fp.size); err != nil {
		return fmt.Errorf("file sink: write partition %d: %w", batch[0].Partition, err)
	}
	fp.size += int64(len(fp.lb.buf))
	fp.next = batch[len(batch)-1].Offset + 1
	fp.lb.release()
	return nil
}

func (st *partStager) sync(fp *filePart, p int32) error {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.syncErr != nil {
		return fp.syncErr
	}
	if err := fp.f.Sync(); err != nil {
		fp.syncErr = fmt.Errorf("file sink: fsync partition %d: %w", p, err)
		return fp.syncErr
	}
	fp.synced = fp.size
	return nil
}

func (st *partStager) synced(p int32) int64 {
	st.mu.Lock()
	fp := st.parts[p]
	st.mu.Unlock()
	if fp == nil {
		return 0
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.synced
}

func (st *partStager) close() error {
	var errs []error
	for p, fp := range st.parts {
		errs = append(errs, fp.f.Close())
		delete(st.parts, p)
	}
	return errors.Join(errs...)
}

// end is where the complete lines of partition p's staging file f end:
// its size when this process wrote (and recovered) it, else scanned.
func (st *partStager) end(p int32, f *os.File) (int64, error) {
	if fp, ok := st.parts[p]; ok {
		return fp.size, nil
	}
	end, _, err := scanLines(f, -1)
	return end, err
}
