// Package tracepng draws a timeline (package trace) as a PNG with
// gonum.org/v1/plot, for machines where no trace viewer is reachable:
//
//	tl := trace.FromPlan(p, trace.Ideal(p))
//	err := tracepng.Write(tl, "plan.png", 0, 0) // sizes chosen from the lane count
//
// It is a package of its own so that programs that run plans, and package
// trace's Chrome trace-event JSON, do not link the plotting library and its
// fonts; the dagrun command imports it for run --timeline.
package tracepng

import (
	"bufio"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dagrun/dagrun/executor/trace"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Picture geometry. Lengths in vg units are points (1/72 inch); the PNG is
// rendered at pngDPI, so one pixel is 72/pngDPI points.
const (
	pngDPI         = 96
	minPx          = 100  // smallest accepted width or height, px
	defaultWidth   = 1600 // px, when widthPx is 0
	overheadPx     = 150  // title (four lines), x axis and margins, px (used to size lanes)
	laneMinPx      = 12   // lane height range when heightPx is 0, px
	laneMaxPx      = 40
	laneBudgetPx   = 600 // total lane height that few lanes share when heightPx is 0, px
	barFill        = 0.8 // fraction of a lane's height that a bar fills
	maxTickLabel   = 18  // runes of a lane name shown on the y axis
	minFontPt      = 5
	maxFontPt      = 9
	minBarWidthPt  = 0.75 // one pixel: a shorter span is widened to stay visible
	arrowsOnTopMax = 100  // with more wait arrows, their lines go beneath the bars
)

// Write draws t with gonum.org/v1/plot and writes it as a PNG of
// widthPx × heightPx pixels to path. A size of 0 picks one: 1600 px wide,
// and a height that gives each lane 600/lanes px, clamped to 12–40 px,
// plus room for the title and axis (so ~160 lanes make ~2,000 px).
//
// The x axis is µs from the start of the run; each stream is a lane, stream
// 0 at the top, labelled with its name on the y axis (every k-th name when
// lanes are thinner than the font); lanes alternate a light background.
// Each span is a bar in its stream's colour (ten colours, cycling), with
// consecutive bars of a lane alternating two shades so back-to-back stages
// stay apart, and the stage name inside when the whole name fits (left out
// when the bar is too narrow or the lane too thin: a name cut short names
// no stage). Bars shorter than a pixel are drawn one pixel wide. With several
// iterations (Span.Iteration), bars of odd iterations are paler. Each flow is a
// red arrow from the end of the producer's bar to the start of the
// consumer's bar, fainter the more flows there are; beyond 100 flows the
// lines go beneath the bars (so that names stay legible) and only the heads
// are drawn on top. The title is t.Title with a summary line (streams, spans,
// iterations, waits, makespan) and a key saying what bars, shades and
// arrows mean.
//
// The file is written atomically: to a temporary file in path's directory,
// renamed over path when complete (mode 0644). On any error nothing is left
// behind and an existing file at path is untouched. It returns an error for
// a size below 100 px, for a span that t.Check rejects,
// and for file system errors.
func Write(t *trace.Timeline, path string, widthPx, heightPx int) error {
	if err := t.Check(); err != nil {
		return err
	}
	if (widthPx != 0 && widthPx < minPx) || (heightPx != 0 && heightPx < minPx) {
		return fmt.Errorf("trace: png size %d×%d px, want at least %d px each (0 picks a size)", widthPx, heightPx, minPx)
	}
	w, h := pngSize(t, widthPx, heightPx)
	c, err := render(t, w, h)
	if err != nil {
		return err
	}
	return writeAtomic(path, func(f *os.File) error {
		bw := bufio.NewWriter(f)
		if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// pngSize resolves a requested size (0 = pick) to pixels.
func pngSize(t *trace.Timeline, widthPx, heightPx int) (int, int) {
	if widthPx == 0 {
		widthPx = defaultWidth
	}
	if heightPx == 0 {
		n := max(1, len(t.Streams))
		lane := min(laneMaxPx, max(laneMinPx, laneBudgetPx/n))
		heightPx = max(3*minPx, n*lane+overheadPx)
	}
	return widthPx, heightPx
}

// writeAtomic writes path through a temporary file in the same directory
// and renames it into place; on error the temporary file is removed.
func writeAtomic(path string, write func(*os.File) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("trace: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("trace: write %s: %w", path, err)
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// render draws the timeline on a w×h px canvas.
func render(t *trace.Timeline, w, h int) (c *vgimg.Canvas, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("trace: drawing %d×%d px timeline: %v", w, h, r)
		}
	}()
	pt := func(px float64) vg.Length { return vg.Length(px * 72 / pngDPI) }
	n := len(t.Streams)
	lanePt := float64(pt(float64(max(h-overheadPx, minPx/2)))) / float64(max(1, n))
	tickFont := clamp(lanePt*0.8, minFontPt, maxFontPt)
	barFont := clamp(lanePt*barFill*0.8, minFontPt, maxFontPt)

	p := plot.New()
	p.Title.Text = t.Title
	if p.Title.Text == "" {
		p.Title.Text = "dagrun timeline"
	}
	p.Title.Text += "\n" + summary(t) + "\n" + key(t)
	p.Title.Padding = pt(6)
	p.X.Label.Text = "time (µs)"
	p.X.Tick.Marker = usTicks{}
	p.X.Padding, p.Y.Padding = 0, 0

	// Lane names on the y axis, every step-th one so that they do not overlap.
	step := max(1, int(math.Ceil((tickFont+1)/lanePt)))
	var ticks plot.ConstantTicks
	for s := 0; s < n; s += step {
		ticks = append(ticks, plot.Tick{Value: laneY(n, s), Label: shorten(t.Streams[s], maxTickLabel)})
	}
	p.Y.Tick.Marker = ticks
	p.Y.Tick.Label.Font.Size = vg.Length(tickFont)
	p.Y.Tick.Length = pt(3)

	grid := plotter.NewGrid()
	grid.Horizontal.Width = 0
	grid.Vertical.Color = color.Gray{Y: 215}
	grid.Vertical.Width = pt(1)
	sp := &spanPlotter{t: t, barFont: barFont}
	p.Add(lanePlotter{n: n}, grid, sp)

	xmin, xmax := 0.0, trace.Makespan(t.Spans)
	for _, s := range t.Spans {
		xmin = math.Min(xmin, s.StartUS)
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min, p.Y.Max = -0.5, float64(max(1, n))-0.5

	c = vgimg.NewWith(vgimg.UseWH(pt(float64(w)), pt(float64(h))), vgimg.UseDPI(pngDPI))
	p.Draw(draw.New(c))
	return c, nil
}

// summary is the title's second line.
func summary(t *trace.Timeline) string {
	its := ""
	if n := t.Iterations(); n > 1 {
		its = fmt.Sprintf(" · %d iterations", n)
	}
	return fmt.Sprintf("%d streams · %d stage runs%s · %d waits · makespan %.1f µs",
		len(t.Streams), len(t.Spans), its, len(t.Flows), trace.Makespan(t.Spans))
}

// key is the title's last two lines: what the marks mean.
func key(t *trace.Timeline) string {
	its := ""
	if t.Iterations() > 1 {
		its = ", paler in every other iteration"
	}
	return "key — bars: stage runs, coloured by stream (two shades: back-to-back stages" + its + "), named where the name fits\n" +
		"red arrows: waits, from the end of the awaited stage to the start of the stage the wait holds back"
}

// usTicks puts about ten labelled ticks on the time axis, at multiples of
// 1, 2 or 5 × 10^k µs (plot.DefaultTicks gives about three, too few to read
// gaps off a wide picture).
type usTicks struct{}

func (usTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	raw := (hi - lo) / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	var ticks []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi; k++ {
		v := k*step + 0 // no "-0"
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	return ticks
}

// laneY is the y value of stream s's lane centre: stream 0 at the top.
func laneY(n, s int) float64 { return float64(n - 1 - s) }

// lanePlotter shades every other lane.
type lanePlotter struct{ n int }

func (lp lanePlotter) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	x0, x1 := trX(plt.X.Min), trX(plt.X.Max)
	for s := 1; s < lp.n; s += 2 {
		y := laneY(lp.n, s)
		y0, y1 := trY(y-0.5), trY(y+0.5)
		c.FillPolygon(color.Gray{Y: 244}, rect(x0, y0, x1, y1))
	}
}

// spanPlotter draws the bars, their labels and the wait arrows.
type spanPlotter struct {
	t       *trace.Timeline
	barFont float64 // points
}

// palette is Tableau 10: distinct hues that stay apart on a white background.
var palette = []color.NRGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255},
}

func (sp *spanPlotter) Plot(c draw.Canvas, plt *plot.Plot) {
	t := sp.t
	n := len(t.Streams)
	trX, trY := plt.Transforms(&c)
	laneH := float64(trY(1) - trY(0))
	half := barFill / 2

	// Wait arrows: from the producer's end to the consumer's start, head at
	// the consumer. Many arrows are drawn fainter and beneath the bars, so
	// that bars and names stay legible; their heads still go on top.
	flows := t.DrawnFlows()
	alpha := uint8(clamp(200*math.Sqrt(100/float64(max(1, len(flows)))), 70, 200))
	arrow := draw.LineStyle{Color: color.NRGBA{R: 200, G: 20, B: 20, A: alpha}, Width: vg.Length(clamp(laneH*0.06, 0.5, 1.2))}
	headLen := clamp(laneH*0.45, 2.5, 6)
	arrows := make([][3]vg.Point, 0, len(flows)) // tail, head base, tip
	for _, df := range flows {
		from, to := &t.Spans[df.From], &t.Spans[df.To]
		p0 := vg.Point{X: trX(from.EndUS), Y: trY(laneY(n, from.Stream))}
		p1 := vg.Point{X: trX(to.StartUS), Y: trY(laneY(n, to.Stream))}
		dx, dy := float64(p1.X-p0.X), float64(p1.Y-p0.Y)
		d := math.Hypot(dx, dy)
		if d < 1 {
			continue // same point: nothing to draw
		}
		hl := math.Min(headLen, d)
		base := vg.Point{X: p1.X - vg.Length(dx/d*hl), Y: p1.Y - vg.Length(dy/d*hl)}
		arrows = append(arrows, [3]vg.Point{p0, base, p1})
	}
	lines := func() {
		for _, a := range arrows {
			c.StrokeLine2(arrow, a[0].X, a[0].Y, a[1].X, a[1].Y)
		}
	}
	heads := func() {
		for _, a := range arrows {
			base, tip := a[1], a[2]
			// Half-width 0.45 × the head's length, across the arrow.
			wx, wy := (base.Y-tip.Y)*0.45, (tip.X-base.X)*0.45
			c.FillPolygon(arrow.Color, []vg.Point{tip, {X: base.X - wx, Y: base.Y - wy}, {X: base.X + wx, Y: base.Y + wy}})
		}
	}
	beneath := len(arrows) > arrowsOnTopMax
	if beneath {
		lines()
	}

	// Bars, lane by lane in time order, alternating two shades per lane.
	order := t.LaneOrder()
	type box struct {
		x0, x1, y0, y1 vg.Length
		fill           color.NRGBA
	}
	boxes := make([]box, len(t.Spans)) // by span index
	nth := 0
	for k, i := range order {
		s := &t.Spans[i]
		if k > 0 && t.Spans[order[k-1]].Stream != s.Stream {
			nth = 0
		}
		y := laneY(n, s.Stream)
		b := box{x0: trX(s.StartUS), x1: trX(s.EndUS), y0: trY(y - half), y1: trY(y + half)}
		if b.x1-b.x0 < minBarWidthPt {
			b.x1 = b.x0 + minBarWidthPt
		}
		b.fill = palette[s.Stream%len(palette)]
		if nth%2 == 1 {
			b.fill = shade(b.fill, 0.72)
		}
		if s.Iteration%2 == 1 {
			b.fill = tint(b.fill, 0.45)
		}
		nth++
		boxes[i] = b
		c.FillPolygon(b.fill, rect(b.x0, b.y0, b.x1, b.y1))
	}

	// Stage names inside bars that have room.
	if laneH*barFill >= sp.barFont {
		sty := text.Style{
			Font:    font.From(plot.DefaultFont, vg.Length(sp.barFont)),
			XAlign:  draw.XCenter,
			YAlign:  draw.YCenter,
			Handler: plt.TextHandler,
		}
		pad := vg.Length(2)
		for i := range t.Spans {
			b := boxes[i]
			label := fitLabel(sty, t.Spans[i].Name, b.x1-b.x0-2*pad)
			if label == "" {
				continue
			}
			sty.Color = textOn(b.fill)
			c.FillText(sty, vg.Point{X: (b.x0 + b.x1) / 2, Y: (b.y0 + b.y1) / 2}, label)
		}
	}

	if !beneath {
		lines()
	}
	heads()
}

// fitLabel returns name when it fits in width, else "": a name cut short
// ("con…") names no stage.
func fitLabel(sty text.Style, name string, width vg.Length) string {
	if width <= 0 || name == "" || sty.Width(name) > width {
		return ""
	}
	return name
}

// shorten cuts s to at most n runes, ending in "…" when cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// shade darkens c by factor f (0 black, 1 unchanged).
func shade(c color.NRGBA, f float64) color.NRGBA {
	return color.NRGBA{R: uint8(float64(c.R) * f), G: uint8(float64(c.G) * f), B: uint8(float64(c.B) * f), A: c.A}
}

// tint mixes c with white by factor f (0 unchanged, 1 white).
func tint(c color.NRGBA, f float64) color.NRGBA {
	m := func(v uint8) uint8 { return uint8(float64(v) + (255-float64(v))*f) }
	return color.NRGBA{R: m(c.R), G: m(c.G), B: m(c.B), A: c.A}
}

// textOn picks black or white text for a fill, by its luma (ITU-R BT.601).
func textOn(c color.NRGBA) color.Color {
	if 0.299*float64(c.R)+0.587*float64(c.G)+0.114*float64(c.B) > 150 {
		return color.Black
	}
	return color.White
}

func rect(x0, y0, x1, y1 vg.Length) []vg.Point {
	return []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
}

func clamp(v, lo, hi float64) float64 { return math.Min(hi, math.Max(lo, v)) }
