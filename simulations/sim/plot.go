package sim

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot files of a report.
const (
	PlotLatency   = "latency-cdf.png"
	PlotBytes     = "bytes-per-tier.png"
	PlotConverged = "converged.png"
)

// curve is one latency distribution to draw.
type curve struct {
	name string
	h    *histogram
}

// plotLatency draws the CDFs of root write → arrival, milliseconds on a
// log axis.
func plotLatency(path, title string, curves []curve) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "root write → arrival (ms, log scale)"
	p.Y.Label.Text = "share of (destination, change) pairs"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{}
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Millimeter
	p.Legend.YOffs = vg.Millimeter * 4
	drawn := 0
	for i, c := range curves {
		xs, ys := c.h.cdf()
		if len(xs) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, len(xs)+1)
		first := math.Max(float64(xs[0].Microseconds())/1000, 0.01)
		pts = append(pts, plotter.XY{X: first, Y: 0})
		for j := range xs {
			pts = append(pts, plotter.XY{X: math.Max(float64(xs[j].Microseconds())/1000, 0.01), Y: ys[j]})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (p50 %.0f ms, p99 %.0f ms)", c.name, ms(c.h.quantile(.5)), ms(c.h.quantile(.99))), l)
		drawn++
	}
	if drawn == 0 {
		p.X.Scale = plot.LinearScale{}
		p.X.Tick.Marker = plot.DefaultTicks{}
	}
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// logTicks labels 1, 2 and 5 times the powers of ten on a log axis,
// which plot.LogTicks leaves bare within one decade.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// tierBars is one series of bytes per tier.
type tierBars struct {
	name  string
	tiers []TierLinks
}

// plotBytes draws the bytes each tier's links carried during the
// measured phase, down and up, per change.
func plotBytes(path, title string, series []tierBars, changes []int) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "KiB per change"
	p.Add(plotter.NewGrid())
	maxTiers := 0
	for _, s := range series {
		maxTiers = max(maxTiers, len(s.tiers))
	}
	maxTiers = max(maxTiers, 1)
	var names []string
	for i := range maxTiers {
		if i == 0 {
			names = append(names, "tier 1 (root's links)")
		} else {
			names = append(names, fmt.Sprintf("tier %d", i+1))
		}
	}
	bars := len(series) * 2
	w := vg.Points(float64(min(40, 160/max(bars, 1))))
	k := 0
	top := 0.0
	for si, s := range series {
		n := float64(max(changes[si], 1))
		for dir := range 2 {
			vals := make(plotter.Values, maxTiers)
			for i, t := range s.tiers {
				b := t.DownBytes
				if dir == 1 {
					b = t.UpBytes
				}
				vals[i] = float64(b) / 1024 / n
				top = max(top, vals[i])
			}
			bc, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return err
			}
			bc.LineStyle.Width = 0
			bc.Color = plotutil.Color(k)
			bc.Offset = vg.Length(float64(k)-float64(bars-1)/2) * w
			p.Add(bc)
			label := s.name + " down"
			if dir == 1 {
				label = s.name + " up (acks, reports)"
			}
			p.Legend.Add(strings.TrimSpace(label), bc)
			k++
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Millimeter * 18
	p.Y.Min = 0
	p.Y.Max = top * 1.45
	p.NominalX(names...)
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// plotConverged draws destinations holding every latest version, and
// connected ones, over the measured phase, with the scenario's events as
// vertical lines.
func plotConverged(path, title string, pts []point, total int, events []Event) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds into the measured phase"
	p.Y.Label.Text = "destinations"
	p.Y.Min, p.Y.Max = 0, float64(total)*1.05
	p.Add(plotter.NewGrid())
	conv := make(plotter.XYs, len(pts))
	conn := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		conv[i] = plotter.XY{X: pt.at, Y: float64(pt.converged)}
		conn[i] = plotter.XY{X: pt.at, Y: float64(pt.connected)}
	}
	if len(pts) > 0 {
		lc, err := plotter.NewLine(conn)
		if err != nil {
			return err
		}
		lc.Color = color.RGBA{R: 150, G: 150, B: 150, A: 255}
		lc.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(lc)
		p.Legend.Add("connected", lc)
		l, err := plotter.NewLine(conv)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(0)
		l.Width = vg.Points(1.5)
		l.StepStyle = plotter.PostStep
		p.Add(l)
		p.Legend.Add("holding every latest version", l)
	}
	for i, ev := range events {
		v, err := plotter.NewLine(plotter.XYs{{X: ev.AtS, Y: 0}, {X: ev.AtS, Y: float64(total) * 1.05}})
		if err != nil {
			return err
		}
		v.Color = color.RGBA{R: 200, G: 60, B: 60, A: 255}
		v.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(v)
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: ev.AtS, Y: float64(total) * (0.05 + 0.07*float64(i%4))}}, Labels: []string{fmt.Sprintf(" %d", i+1)}})
		if err == nil {
			lbl.TextStyle[0].Color = v.Color
			p.Add(lbl)
		}
	}
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.YOffs = vg.Millimeter * 12
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// writePlots draws the three plots of s into dir.
func writePlots(dir string, s *Summary) error {
	var curves []curve
	if s.flat != nil {
		curves = append(curves, curve{"tree " + s.Topology, s.measured}, curve{"flat " + s.flat.Topology, s.flat.measured})
	} else {
		for _, name := range s.order {
			if name == "placement" {
				continue
			}
			curves = append(curves, curve{name, s.hists[name]})
		}
	}
	if s.CombinedStatus != nil && s.flat == nil {
		all := &histogram{}
		for _, name := range s.statusOrder {
			if name != "placement" {
				all.merge(s.statusHists[name])
			}
		}
		curves = append(curves, curve{"reflected in CombinedStatus", all})
	}
	for i := range curves {
		if curves[i].h == nil {
			curves[i].h = &histogram{}
		}
	}
	title := fmt.Sprintf("%s, %s: propagation to %s", s.Scenario, s.Topology, s.Arrival)
	if err := plotLatency(filepath.Join(dir, PlotLatency), title, curves); err != nil {
		return fmt.Errorf("sim: %s: %w", PlotLatency, err)
	}
	series := []tierBars{{"tree", s.Tiers}}
	changes := []int{s.Changes}
	if s.flat != nil {
		series = append(series, tierBars{"flat", s.flat.Tiers})
		changes = append(changes, s.flat.Changes)
	} else {
		series[0].name = ""
	}
	if err := plotBytes(filepath.Join(dir, PlotBytes), fmt.Sprintf("%s, %s: bytes per tier and change", s.Scenario, s.Topology), series, changes); err != nil {
		return fmt.Errorf("sim: %s: %w", PlotBytes, err)
	}
	if err := plotConverged(filepath.Join(dir, PlotConverged), fmt.Sprintf("%s, %s: destinations converged", s.Scenario, s.Topology), s.series, s.Edges, s.Events); err != nil {
		return fmt.Errorf("sim: %s: %w", PlotConverged, err)
	}
	return nil
}
