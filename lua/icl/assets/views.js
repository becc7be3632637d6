/* icl.html views: attention heads, head scores, token values. Reads its data from the JSON block #icl-data of
 * the page (no network); with #selftest in the URL it drives its own controls and writes the result into
 * #icl-selftest, which the test suite reads back from headless Chromium. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("icl-data").textContent);
  var root = document.getElementById("icl-view");
  var NAN = 255, TOP = 254;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v) { return v === null || v !== v ? "NaN" : (Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(3)); }
  /* white -> blue for t in [0, 1] */
  function colour(t) {
    t = Math.max(0, Math.min(1, t));
    return [Math.round(255 - 215 * t), Math.round(255 - 160 * t), Math.round(255 - 40 * t)];
  }
  function css(rgb) { return "rgb(" + rgb[0] + "," + rgb[1] + "," + rgb[2] + ")"; }
  function decode(b64) {
    var s = atob(b64), a = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }

  /* ---- attention --------------------------------------------------------------------------------------- */
  function attention() {
    var T = D.n, tri = T * (T + 1) / 2, W = Math.min(T, D.window), heads = [];
    D.names.forEach(function (name, li) {
      var codes = decode(D.data[name]);
      for (var h = 0; h < D.heads[li]; h++) heads.push({name: name, label: D.labels[li] + " H" + D.head_ids[li][h], codes: codes, off: h * tri});
    });
    function code(hd, q, k) { return k > q ? -1 : hd.codes[hd.off + q * (q + 1) / 2 + k]; }
    function value(c) { return c === NAN ? NaN : D.lo + (D.hi - D.lo) * c / TOP; }
    var st = {cur: 0, locked: -1, w0: Math.max(0, T - W), q: T - 1, mode: "row"};

    root.appendChild(el("h1", "", D.title));
    var bar = el("div", "bar"), sel = el("select"), mode = el("select"), slider = el("input");
    heads.forEach(function (hd, i) { var o = el("option", "", hd.label); o.value = i; sel.appendChild(o); });
    [["row", "colour tokens by the selected query's attention"], ["col", "colour tokens by the attention the selected key receives"]]
      .forEach(function (m) { var o = el("option", "", m[1]); o.value = m[0]; mode.appendChild(o); });
    slider.type = "range"; slider.min = 0; slider.max = T - W; slider.value = st.w0; slider.id = "window";
    bar.appendChild(el("span", "", "head")); bar.appendChild(sel);
    bar.appendChild(el("span", "", "window " + W + " of " + T + " positions, from")); bar.appendChild(slider);
    bar.appendChild(mode);
    root.appendChild(bar);
    var grid = el("div", "grid");
    root.appendChild(grid);
    var thumbs = heads.map(function (hd, i) {
      var box = el("div", "thumb"), cv = el("canvas"), n = Math.min(T, 96);
      cv.width = cv.height = n;
      var ctx = cv.getContext("2d"), img = ctx.createImageData(n, n);
      for (var y = 0; y < n; y++) for (var x = 0; x < n; x++) { /* max over the block of positions each pixel covers */
        var q0 = Math.floor(y * T / n), q1 = Math.floor((y + 1) * T / n), k0 = Math.floor(x * T / n), k1 = Math.floor((x + 1) * T / n);
        var best = -1;
        for (var q = q0; q < q1; q++) for (var k = k0; k < k1 && k <= q; k++) { var c = code(hd, q, k); if (c !== NAN && c > best) best = c; }
        var rgb = best < 0 ? [238, 238, 238] : colour(best / TOP), p = 4 * (y * n + x);
        img.data[p] = rgb[0]; img.data[p + 1] = rgb[1]; img.data[p + 2] = rgb[2]; img.data[p + 3] = 255;
      }
      ctx.putImageData(img, 0, 0);
      cv.style.width = cv.style.height = "96px";
      box.appendChild(cv); box.appendChild(el("div", "", hd.label));
      box.addEventListener("mouseover", function () { if (st.locked < 0) show(i); box.classList.add("hover"); });
      box.addEventListener("mouseout", function () { box.classList.remove("hover"); });
      box.addEventListener("click", function () { st.locked = st.locked === i ? -1 : i; show(i); });
      grid.appendChild(box);
      return box;
    });
    var zoom = el("canvas"), px = Math.max(1, Math.floor(480 / W));
    zoom.id = "zoom"; zoom.width = zoom.height = W * px;
    root.appendChild(zoom);
    var readout = el("div", "", ""); readout.id = "readout";
    root.appendChild(readout);
    var strip = el("div", "tokens");
    var spans = D.tokens.map(function (t, i) {
      var s = el("span", "tok", t);
      s.addEventListener("click", function () { st.q = i; paintTokens(); });
      s.addEventListener("mouseover", function () { readout.textContent = tokenText(i); });
      strip.appendChild(s);
      return s;
    });
    root.appendChild(strip);

    function tokenText(i) {
      var hd = heads[st.cur], c = st.mode === "row" ? code(hd, st.q, i) : code(hd, i, st.q);
      return "position " + (i + 1) + " " + JSON.stringify(D.tokens[i]) + ": " + (c < 0 ? "masked (causal)" : fmt(value(c)));
    }
    function paintZoom() {
      var hd = heads[st.cur], ctx = zoom.getContext("2d");
      for (var y = 0; y < W; y++) for (var x = 0; x < W; x++) {
        var q = st.w0 + y, k = st.w0 + x, c = code(hd, q, k);
        ctx.fillStyle = c < 0 ? "#eeeeee" : c === NAN ? ((x + y) % 2 ? "#999999" : "#cccccc") : css(colour(c / TOP));
        ctx.fillRect(x * px, y * px, px, px);
      }
    }
    function paintTokens() {
      var hd = heads[st.cur];
      spans.forEach(function (s, i) {
        var c = st.mode === "row" ? code(hd, st.q, i) : code(hd, i, st.q);
        s.classList.toggle("sel", i === st.q);
        s.classList.toggle("nan", c === NAN);
        s.style.background = c < 0 || c === NAN ? "" : css(colour(c / TOP));
      });
    }
    function show(i) {
      st.cur = i; sel.value = i;
      thumbs.forEach(function (b, j) { b.classList.toggle("locked", j === st.locked); });
      paintZoom(); paintTokens();
    }
    zoom.addEventListener("mousemove", function (ev) {
      var r = zoom.getBoundingClientRect(), x = Math.floor((ev.clientX - r.left) / px), y = Math.floor((ev.clientY - r.top) / px);
      var q = st.w0 + Math.min(W - 1, Math.max(0, y)), k = st.w0 + Math.min(W - 1, Math.max(0, x)), c = code(heads[st.cur], q, k);
      readout.textContent = heads[st.cur].label + "  q " + (q + 1) + " " + JSON.stringify(D.tokens[q]) + " -> k " + (k + 1) + " " +
        JSON.stringify(D.tokens[k]) + ": " + (c < 0 ? "masked (causal)" : fmt(value(c)));
    });
    zoom.addEventListener("click", function (ev) {
      var r = zoom.getBoundingClientRect();
      st.q = st.w0 + Math.min(W - 1, Math.max(0, Math.floor((ev.clientY - r.top) / px))); paintTokens();
    });
    sel.addEventListener("change", function () { st.locked = +sel.value; show(+sel.value); });
    mode.addEventListener("change", function () { st.mode = mode.value; paintTokens(); });
    slider.addEventListener("input", function () { st.w0 = +slider.value; paintZoom(); });
    show(0);
    return {st: st, thumbs: thumbs, zoom: zoom, readout: readout, spans: spans, px: px, show: show, heads: heads};
  }

  /* ---- head scores ------------------------------------------------------------------------------------- */
  function headScores() {
    root.appendChild(el("h1", "", D.title));
    var names = D.score_names, L = D.layers, H = D.nheads, cur = 0, bar = el("div", "bar"), sel = el("select");
    names.forEach(function (n, i) { var o = el("option", "", n); o.value = i; sel.appendChild(o); });
    bar.appendChild(el("span", "", "score")); bar.appendChild(sel);
    root.appendChild(bar);
    var readout = el("div", "readout", ""), table = el("table", "heat"), cells = [];
    root.appendChild(table); root.appendChild(readout);
    var hr = el("tr"); hr.appendChild(el("th", "", ""));
    for (var h = 0; h < H; h++) hr.appendChild(el("th", "", "H" + h));
    table.appendChild(hr);
    for (var l = 0; l < L; l++) {
      var tr = el("tr"); tr.appendChild(el("th", "", "L" + l));
      for (h = 0; h < H; h++) (function (l, h) {
        var td = el("td");
        td.addEventListener("mouseover", function () {
          readout.textContent = names[cur] + " L" + l + " H" + h + ": " + fmt(D.scores[cur][l * H + h]);
        });
        tr.appendChild(td); cells.push(td);
      })(l, h);
      table.appendChild(tr);
    }
    function paint() {
      var v = D.scores[cur], lo = Infinity, hi = -Infinity;
      v.forEach(function (x) { if (x !== null) { lo = Math.min(lo, x); hi = Math.max(hi, x); } });
      cells.forEach(function (td, i) {
        var x = v[i];
        td.classList.toggle("nan", x === null);
        td.style.background = x === null ? "" : css(colour(hi > lo ? (x - lo) / (hi - lo) : 0.5));
        td.textContent = x === null ? "NaN" : fmt(x);
      });
    }
    sel.addEventListener("change", function () { cur = +sel.value; paint(); });
    var list = el("table", "list"), head = el("tr"), key = 0, desc = true;
    ["layer", "head"].concat(names).forEach(function (n, c) {
      var th = el("th", "", n);
      th.addEventListener("click", function () { desc = key === c ? !desc : true; key = c; sortList(); });
      head.appendChild(th);
    });
    list.appendChild(head);
    root.appendChild(el("h1", "", "heads, sortable"));
    root.appendChild(list);
    var rows = [];
    for (var i = 0; i < L * H; i++) rows.push([Math.floor(i / H), i % H].concat(names.map(function (_, s) { return D.scores[s][i]; })));
    function sortList() {
      var k = key;
      rows.sort(function (a, b) { /* NaN (null) last, ties by layer and head: a stable, deterministic order */
        var x = a[k] === null ? -Infinity : a[k], y = b[k] === null ? -Infinity : b[k];
        return x !== y ? (desc ? y - x : x - y) : a[0] - b[0] || a[1] - b[1];
      });
      while (list.rows.length > 1) list.deleteRow(1);
      rows.forEach(function (r) {
        var tr = el("tr");
        r.forEach(function (x, c) { tr.appendChild(el("td", x === null ? "nan" : "", c < 2 ? String(x) : fmt(x))); });
        list.appendChild(tr);
      });
    }
    key = 2; sortList(); paint();
    return {cells: cells, readout: readout, list: list, head: head};
  }

  /* ---- token values ------------------------------------------------------------------------------------ */
  function tokenValues() {
    root.appendChild(el("h1", "", D.title));
    var cur = 0, bar = el("div", "bar"), sel = el("select"), readout = el("div", "readout", ""), strip = el("div", "tokens");
    D.columns.forEach(function (n, i) { var o = el("option", "", n); o.value = i; sel.appendChild(o); });
    bar.appendChild(el("span", "", "value")); bar.appendChild(sel);
    root.appendChild(bar); root.appendChild(readout); root.appendChild(strip);
    var spans = D.tokens.map(function (t, i) {
      var s = el("span", "tok", t);
      s.addEventListener("mouseover", function () {
        readout.textContent = "position " + (i + 1) + " " + JSON.stringify(t) + ": " + D.columns[cur] + " = " + fmt(D.values[cur][i]);
      });
      strip.appendChild(s);
      return s;
    });
    function paint() {
      var v = D.values[cur], lo = Infinity, hi = -Infinity;
      v.forEach(function (x) { if (x !== null) { lo = Math.min(lo, x); hi = Math.max(hi, x); } });
      spans.forEach(function (s, i) {
        s.classList.toggle("nan", v[i] === null);
        s.style.background = v[i] === null ? "" : css(colour(hi > lo ? (v[i] - lo) / (hi - lo) : 0.5));
      });
    }
    sel.addEventListener("change", function () { cur = +sel.value; paint(); });
    paint();
    return {spans: spans, readout: readout};
  }

  /* ---- self-test (#selftest) --------------------------------------------------------------------------- */
  function fire(node, type, x, y) {
    var r = node.getBoundingClientRect();
    node.dispatchEvent(new MouseEvent(type, {bubbles: true, clientX: r.left + (x || 1), clientY: r.top + (y || 1)}));
  }
  function distinctColours(cv) {
    var d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data, seen = {}, n = 0;
    for (var i = 0; i < d.length && n < 3; i += 4) { var k = d[i] + "," + d[i + 1] + "," + d[i + 2]; if (!seen[k]) { seen[k] = 1; n++; } }
    return n;
  }
  function selftest(v) {
    var fails = [], n = 0;
    function check(ok, what) { n++; if (!ok) fails.push(what); }
    if (D.view === "attention") {
      var total = v.heads.length;
      check(v.thumbs.length === total, "one thumbnail per head");
      check(v.spans.length === D.n, "one token span per position");
      fire(v.thumbs[total - 1], "mouseover");
      check(v.st.cur === total - 1, "hover previews a head");
      fire(v.thumbs[0], "click");
      check(v.st.locked === 0 && v.thumbs[0].classList.contains("locked"), "click locks a head");
      fire(v.thumbs[total - 1], "mouseover");
      check(v.st.cur === 0, "a locked head stays while another is hovered");
      fire(v.zoom, "mousemove", v.zoom.width - 2, v.zoom.height - 2);
      check(/ -> k /.test(v.readout.textContent), "the zoomed heatmap reads out the value under the cursor");
      fire(v.zoom, "mousemove", v.zoom.width - 2, 1);
      check(/masked \(causal\)/.test(v.readout.textContent), "the causal mask is shown above the diagonal");
      check(distinctColours(v.zoom) > 1, "the heatmap's pixels vary");
      fire(v.spans[0], "click");
      check(v.st.q === 0 && v.spans[0].classList.contains("sel"), "clicking a token selects the query");
      check(v.spans[0].style.background !== "" || v.spans[0].classList.contains("nan"), "the token strip is coloured");
    } else if (D.view === "heads") {
      fire(v.cells[0], "mouseover");
      check(/L0 H0: /.test(v.readout.textContent), "hovering a cell reads out its value");
      var th = v.head.cells[0];
      fire(th, "click");
      check(v.list.rows[1].cells[0].textContent === String(D.layers - 1), "sorting by layer (descending)");
      check(v.cells.length === D.layers * D.nheads, "one cell per head");
    } else {
      check(v.spans.length === D.tokens.length, "one span per token");
      fire(v.spans[0], "mouseover");
      check(/^position 1 /.test(v.readout.textContent), "hovering a token reads out its value");
    }
    var out = el("pre", "", fails.length ? "selftest: FAIL " + fails.join("; ") : "selftest: PASS " + n + " checks");
    out.id = "icl-selftest";
    document.body.appendChild(out);
  }

  try {
    var v = D.view === "attention" ? attention() : D.view === "heads" ? headScores() : tokenValues();
    root.setAttribute("data-render-ms", performance.now().toFixed(0)); /* first screen drawn: scripts/bench-html.sh */
    if (location.hash === "#selftest") selftest(v);
  } catch (e) { /* shown, not swallowed: a view that cannot draw says why */
    var pre = el("pre", "", "icl view error: " + e + (e && e.stack ? "\n" + e.stack : ""));
    pre.id = "icl-error";
    document.body.appendChild(pre);
  }
})();
