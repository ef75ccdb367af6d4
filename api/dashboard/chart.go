package dashboard

import (
	"slices"
	"strconv"
	"time"

	"github.com/prchat/prchat/chat"
)

// dayChart is a bar chart of turns per day, stacked by state, drawn as SVG
// on the server: no script and no chart library from elsewhere.
type dayChart struct {
	Width, Height int
	Bars          []bar
	Labels        []label
	Max           int
}

type bar struct {
	X, Y, W, H int
	State      string
	Title      string
}

type label struct {
	X, Y int
	Text string
}

const (
	chartHeight = 160
	chartBarW   = 28
	chartGap    = 10
	chartBase   = chartHeight - 20
)

// chartOf draws the window's days, one bar each (days without turns too).
func chartOf(st chat.Stats) dayChart {
	perDay := map[string]map[chat.State]int{}
	for _, dc := range st.Days {
		if perDay[dc.Day] == nil {
			perDay[dc.Day] = map[chat.State]int{}
		}
		perDay[dc.Day][dc.State] += dc.Turns
	}
	var days []string
	for d := st.Since.UTC().Truncate(24 * time.Hour); !d.After(st.Until); d = d.Add(24 * time.Hour) {
		days = append(days, d.Format(time.DateOnly))
	}
	for d := range perDay {
		if !slices.Contains(days, d) {
			days = append(days, d)
		}
	}
	slices.Sort(days)
	maxTotal := 1
	for _, d := range days {
		total := 0
		for _, n := range perDay[d] {
			total += n
		}
		maxTotal = max(maxTotal, total)
	}
	states := []chat.State{chat.StateSucceeded, chat.StateFailed, chat.StateCancelled, chat.StateInterrupted, chat.StateRunning, chat.StateQueued}
	ch := dayChart{Width: len(days)*(chartBarW+chartGap) + chartGap, Height: chartHeight, Max: maxTotal}
	for i, d := range days {
		x := chartGap + i*(chartBarW+chartGap)
		y := chartBase
		for _, s := range states {
			n := perDay[d][s]
			if n == 0 {
				continue
			}
			h := max(1, n*(chartBase-10)/maxTotal)
			y -= h
			ch.Bars = append(ch.Bars, bar{X: x, Y: y, W: chartBarW, H: h, State: string(s), Title: d + ": " + strconv.Itoa(n) + " " + string(s)})
		}
		ch.Labels = append(ch.Labels, label{X: x + chartBarW/2, Y: chartHeight - 5, Text: d[5:]})
	}
	return ch
}
