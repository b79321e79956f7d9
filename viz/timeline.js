// The HTML report's timeline, drawn in proportion at every zoom (rlscope.viz.timeline).
//
// Thousands of operation instances or kernels can fall in one pixel. Drawn as they are, plotly
// widens every bar thinner than two pixels to stay visible, so short, frequent operations look far
// longer than they are. Instead, for the x range on screen, each row layer (a thread's nesting
// depth, a GPU stream) is cut into bins of BIN_PX pixels; each bin is given to one name by error
// diffusion over the time each name occupies in it (or left empty when idle time is owed most),
// and runs of bins with the same name become one bar. Every name's drawn width then follows its
// time to within about a bin, anywhere on the row, and instances a few bins wide or more are drawn
// at their own start and end. Zooming redraws from the recorded instances.
/* exported rlscopeTimeline */
"use strict";

var RLSCOPE_BIN_PX = 3;

function rlscopeTimeline(gd, data) {
  // data: {window: [t0, t1] s, keys: [{trace}] (plotly trace of each key), layers: [{y, width}],
  //        seg: {layer: [], key: [], start: [], dur: []} (ns since window[0]), labels: [] or null}
  // labels are HTML-escaped already (rlscope.text.html_text): plotly reads hover text as HTML
  var nKeys = data.keys.length;
  var byLayer = data.layers.map(function () { return []; });
  for (var i = 0; i < data.seg.layer.length; i++) byLayer[data.seg.layer[i]].push(i);
  var busy = false, again = false;

  function bars(v0, v1, px) {
    var out = data.keys.map(function () {
      return { base: [], x: [], y: [], width: [], text: [] };
    });
    var nb = Math.max(1, Math.ceil(px / RLSCOPE_BIN_PX));
    var bw = (v1 - v0) / nb;
    var occ = new Float64Array(nb * nKeys); // seconds of each key in each bin
    var starts = new Int32Array(nb * nKeys); // instances starting in each bin
    var only = new Int32Array(nb * nKeys); // the one instance of a key in a bin (-1 none, -2 several)
    data.layers.forEach(function (layer, li) {
      occ.fill(0);
      starts.fill(0);
      only.fill(-1);
      byLayer[li].forEach(function (i) {
        var s = data.window[0] + data.seg.start[i] * 1e-9;
        var e = s + data.seg.dur[i] * 1e-9;
        var k = data.seg.key[i];
        if (e <= v0 || s >= v1) return;
        var a = Math.max(s, v0), b = Math.min(e, v1);
        var b0 = Math.min(nb - 1, Math.floor((a - v0) / bw));
        var b1 = Math.min(nb - 1, Math.floor((b - v0) / bw));
        if (s >= v0) starts[b0 * nKeys + k] += 1;
        for (var j = b0; j <= b1; j++) {
          var lo = Math.max(a, v0 + j * bw), hi = Math.min(b, v0 + (j + 1) * bw);
          var c = j * nKeys + k;
          if (hi > lo) occ[c] += hi - lo;
          only[c] = only[c] === -1 || only[c] === i ? i : -2;
        }
      });
      // error diffusion: each bin goes to the present key owed the most bin-widths (idle: -1)
      var owed = new Float64Array(nKeys), owedIdle = 0, runKey = -1, runFrom = 0;
      function close(j) {
        if (runKey < 0) return;
        var t = 0, n = 0, one = -1;
        for (var q = runFrom; q < j; q++) {
          var c = q * nKeys + runKey;
          t += occ[c];
          n += starts[c];
          one = q === runFrom ? only[c] : (only[c] === one || only[c] === -1 ? one : -2);
        }
        var o = out[runKey];
        o.base.push(v0 + runFrom * bw);
        o.x.push((j - runFrom) * bw);
        o.y.push(layer.y);
        o.width.push(layer.width);
        var label = one >= 0 && data.seg.label[one] >= 0 ? data.labels[data.seg.label[one]] + "<br>" : "";
        var what = one >= 0 ? fmt(data.seg.dur[one] * 1e-9)
          : n + " started here, " + fmt(t) + " of these " + fmt((j - runFrom) * bw);
        o.text.push(label + what);
      }
      for (var j = 0; j < nb; j++) {
        var used = 0, best = -1, bestOwed = -Infinity;
        for (var k = 0; k < nKeys; k++) {
          var f = occ[j * nKeys + k] / bw;
          if (f <= 0) continue;
          used += f;
          owed[k] += f;
          if (owed[k] > bestOwed) { best = k; bestOwed = owed[k]; }
        }
        owedIdle += Math.max(0, 1 - used);
        if (best < 0 || owedIdle > bestOwed) { owedIdle -= 1; best = -1; } else owed[best] -= 1;
        if (best !== runKey) { close(j); runKey = best; runFrom = j; }
      }
      close(nb);
    });
    return out;
  }

  function fmt(s) {
    return s >= 1 ? s.toFixed(3) + " s" : s >= 1e-3 ? (s * 1e3).toFixed(3) + " ms" : (s * 1e6).toFixed(1) + " µs";
  }

  function draw() {
    if (busy) { again = true; return; }
    var ax = gd._fullLayout.xaxis;
    var r = ax.range.map(Number);
    var v0 = Math.max(r[0], data.window[0]), v1 = Math.min(r[1], data.window[1]);
    if (!(v1 > v0 && r[1] > r[0])) return;
    var out = bars(v0, v1, (ax._length * (v1 - v0)) / (r[1] - r[0]));
    var upd = { base: [], x: [], y: [], width: [], hovertext: [] };
    out.forEach(function (o) {
      upd.base.push(o.base);
      upd.x.push(o.x);
      upd.y.push(o.y);
      upd.width.push(o.width);
      upd.hovertext.push(o.text);
    });
    busy = true;
    function done() {
      busy = false;
      if (again) { again = false; draw(); }
    }
    Plotly.restyle(gd, upd, data.keys.map(function (key) { return key.trace; })).then(done, done);
  }

  gd.on("plotly_relayout", function (ev) {
    if (ev["xaxis.autorange"]) {
      Plotly.relayout(gd, { "xaxis.range": data.window.slice() });  // back to the window: redraws
      return;
    }
    draw();
  });
  draw();
}
