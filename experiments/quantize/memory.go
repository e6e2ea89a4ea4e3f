package quantize

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"gptlab/models"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// memRow is one model's memory: its weights, and its evaluation graph as
// planned and as measured.
type memRow struct {
	name     string
	weights  models.WeightBytes
	inputs   map[arena.Dtype]int64 // the program's inputs by type
	arena    int64                 // the planned arena of the evaluation
	measured int64                 // the heap's peak over load, compile and evaluation
	resident int64                 // the live heap after evaluation, the model still held (after a GC)
	held     int64                 // the weights' bytes the model holds, as planned (packed codes, their scales and corrections, the float32 part)
	loaded   int64                 // the live heap after the load (after a GC): the weights as held
	codes    int64                 // packed int8 codes the model holds (0 for float32)
	scales   int64                 // bytes of their scales as stored
	f32Part  int64                 // bytes of the float32 parameters
}

// planned is the evaluation's planned peak: the arena and its inputs.
func (m memRow) planned() int64 {
	s := m.arena
	for _, b := range m.inputs {
		s += b
	}
	return s
}

// memory loads the float32 model and the per-channel int8 one from files
// written here, compiles the evaluation graph of each and runs the
// validation batches, measuring the heap.
func (ql *quantizeLab) memory() ([]memRow, error) {
	dir, err := os.MkdirTemp("", "gptlab-quantize")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	f32Path, i8Path := filepath.Join(dir, "params.safetensors"), filepath.Join(dir, "int8.safetensors")
	if err := ql.f32.SaveParams(f32Path); err != nil {
		return nil, err
	}
	q := ql.q[precision.Int8PerChannel]
	c := &models.Int8Checkpoint{Model: q, Vocab: ql.data.Tok.Chars(), DataName: ql.data.Name, DataHash: models.DataHash(ql.data),
		Step: ql.tc.Iters, Seed: ql.tc.Seed, EvalBatches: ql.cfg.EvalBatches}
	if err := c.Save(i8Path); err != nil {
		return nil, err
	}
	var rows []memRow
	for _, ld := range []struct {
		name string
		load func() (*models.Params, *models.Quantized, error)
	}{
		{"f32", func() (*models.Params, *models.Quantized, error) {
			p, err := models.LoadParams(f32Path)
			return p, nil, err
		}},
		{"int8 channel", func() (*models.Params, *models.Quantized, error) {
			c, err := models.LoadInt8Checkpoint(i8Path)
			if err != nil {
				return nil, nil, err
			}
			return c.Model.Params(), c.Model, nil
		}},
	} {
		row, err := ql.measure(ld.name, ld.load)
		if err != nil {
			return nil, fmt.Errorf("memory of %s: %w", ld.name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// heapObjects is the bytes of live and unswept heap objects.
const heapObjects = "/memory/classes/heap/objects:bytes"

func heapNow() int64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// measure loads a model, compiles its evaluation graph and runs it on the
// validation batches, sampling the heap every millisecond from before the
// load (after a GC) to the end; the load's garbage is collected before
// the compile, so the peak is what the model holds and what its
// evaluation allocates.
func (ql *quantizeLab) measure(name string, load func() (*models.Params, *models.Quantized, error)) (memRow, error) {
	runtime.GC()
	base := heapNow()
	p, q, err := load()
	if err != nil {
		return memRow{}, err
	}
	runtime.GC()
	loaded := heapNow() - base
	var peak atomic.Int64
	peak.Store(heapNow())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if h := heapNow(); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	row := memRow{name: name, loaded: loaded}
	err = func() error {
		var opts []models.ModelOption
		row.weights, row.f32Part = p.Bytes(), 4*int64(p.Count())
		row.held = row.f32Part
		if q != nil {
			opts = append(opts, models.WithInt8(q, models.Int8Dynamic))
			row.weights = q.Bytes()
			for _, n := range q.Names() {
				t := q.Tensor(n)
				row.codes += int64(len(t.Packed().Packed()))
				row.scales += 4 * int64(len(t.Scales))
				row.held += t.ResidentBytes()
			}
		}
		mc := ql.tc.Model
		m, err := models.NewModel(mc, p, mc.Batch, mc.Block, false, opts...)
		if err != nil {
			return err
		}
		defer m.Close()
		row.inputs, row.arena = m.InputBytes(), m.Arena().Stats().ArenaBytes
		err = models.ValBatches(ql.data, mc, ql.tc.Seed, ql.cfg.EvalBatches, func(idx, tgt []int32) error {
			_, err := m.Step(idx, tgt)
			return err
		})
		if h := heapNow(); h > peak.Load() {
			peak.Store(h)
		}
		runtime.GC()
		row.resident = heapNow() - base
		return err
	}()
	if h := heapNow(); h > peak.Load() {
		peak.Store(h)
	}
	close(stop)
	wg.Wait()
	row.measured = peak.Load() - base
	runtime.KeepAlive(p)
	runtime.KeepAlive(q)
	return row, err
}
