// Places the timeline's elements for the interval shown. Every element with
// data-a (milliseconds since the start of the run) is put at that time; a
// rect with data-b as well spans to it; a text with data-sticky stays in
// view while its interval, data-a to data-b, is. The interval comes from #t=FROM-TO
// (seconds) in the address, else from the svg's data-view; the wheel zooms
// around the pointer, dragging pans, and the address follows. Labels of the
// mid and near classes show from a zoom on; a label the edge of the plot
// would cut is hidden, and so is, in a row of labels (one y), a label that
// would overlap another (the violations' and the heal's kept first, then
// from left to right). Once laid out, the page's height
// goes to data-height on <html> (a screenshot is sized by it).
(function () {
  'use strict'
  const MID = 0.12 // px per ms from which the mid labels show
  const NEAR = 4 // and the near ones
  const svg = document.getElementById('timeline')
  const end = Number(svg.dataset.end)
  const left = Number(svg.dataset.left)
  const clip = document.getElementById('plotclip')
  const ticks = document.getElementById('ticks')
  const shown = document.getElementById('shown')
  const items = Array.from(svg.querySelectorAll('[data-a]'), function (el) {
    return {
      el: el,
      a: Number(el.dataset.a),
      b: el.dataset.b === undefined ? null : Number(el.dataset.b),
      text: el.tagName === 'text',
      sticky: el.dataset.sticky !== undefined
    }
  })
  // each label's row, priority, zoom class and width (estimated from its
  // font: hidden labels have no layout to measure)
  for (const it of items) {
    if (!it.text) continue
    const cs = getComputedStyle(it.el)
    const cl = it.el.classList
    it.row = it.el.getAttribute('y')
    it.first = cl.contains('viol') || cl.contains('mark')
    it.zoom = cl.contains('near') ? NEAR : cl.contains('mid') ? MID : 0
    it.end = cs.textAnchor === 'end'
    it.w = it.el.textContent.length * parseFloat(cs.fontSize) * 0.6
  }
  const minSpan = 2 // ms
  let v0 = 0
  let v1 = end
  let right = left + 1

  // parse reads "FROM-TO" in seconds; null if it is not an interval.
  function parse (s) {
    const m = /^(\d+(?:\.\d*)?)-(\d+(?:\.\d*)?)$/.exec(s || '')
    if (!m) return null
    const a = Number(m[1]) * 1000
    const b = Number(m[2]) * 1000
    return b > a ? [a, b] : null
  }

  function fromHash () {
    return parse(decodeURIComponent(location.hash.replace(/^#t=/, '')))
  }

  function show (a, b) {
    const span = Math.min(Math.max(b - a, minSpan), end * 1.5 + minSpan)
    const c = (a + b) / 2
    v0 = Math.max(c - span / 2, -span * 0.25)
    v1 = v0 + span
    layout()
  }

  function layout () {
    right = svg.getBoundingClientRect().width - 10
    const k = (right - left) / (v1 - v0) // px per ms
    const X = function (t) { return left + (t - v0) * k }
    for (const it of items) {
      let x = X(it.a)
      if (it.text) {
        if (it.sticky) x = Math.min(Math.max(x, left), X(it.b))
        x = it.end ? x - 3 : x + 2
        it.el.setAttribute('x', x.toFixed(1))
        it.x0 = it.end ? x - it.w : x
        it.x1 = it.x0 + it.w
      } else {
        it.el.setAttribute('x', x.toFixed(1))
        it.el.setAttribute('width', Math.max(X(it.b) - x, 1.5).toFixed(1))
      }
    }
    clip.setAttribute('width', Math.max(right - left, 0))
    svg.classList.toggle('mid', k >= MID)
    svg.classList.toggle('near', k >= NEAR)
    declutter(k)
    drawTicks(X, k)
    shown.textContent = 'showing ' + (v0 / 1000).toFixed(3) + ' s to ' + (v1 / 1000).toFixed(3) + ' s'
    try {
      history.replaceState(null, '', '#t=' + (Math.max(v0, 0) / 1000).toFixed(3) + '-' + (v1 / 1000).toFixed(3))
    } catch (e) {
      // some browsers refuse it for file: pages; the view still works
    }
  }

  // declutter hides, in each row, the labels shown at zoom k that would
  // overlap one kept before them.
  function declutter (k) {
    const rows = new Map()
    for (const it of items) {
      if (!it.text) continue
      it.el.removeAttribute('visibility')
      if (k < it.zoom) continue
      if (it.x0 < left || it.x1 > right) { // cut by the edge of the plot
        it.el.setAttribute('visibility', 'hidden')
        continue
      }
      if (!rows.has(it.row)) rows.set(it.row, [])
      rows.get(it.row).push(it)
    }
    for (const row of rows.values()) {
      row.sort(function (a, b) { return (b.first - a.first) || (a.x0 - b.x0) })
      const kept = [] // the intervals of the kept violation and heal labels
      let last = -Infinity // the right end of the last other label kept
      for (const it of row) {
        const free = it.x0 > last + 3 && !kept.some(function (r) { return it.x0 < r[1] + 3 && r[0] < it.x1 + 3 })
        if (!free) {
          it.el.setAttribute('visibility', 'hidden')
        } else if (it.first) {
          kept.push([it.x0, it.x1])
        } else {
          last = it.x1
        }
      }
    }
  }

  function drawTicks (X, k) {
    while (ticks.firstChild) ticks.removeChild(ticks.firstChild)
    const raw = 90 / k // ms between ticks for about 90 px
    const p = Math.pow(10, Math.floor(Math.log10(raw)))
    const step = [1, 2, 5, 10].map(function (m) { return m * p }).find(function (s) { return s >= raw })
    const digits = Math.max(0, Math.min(3, 3 - Math.floor(Math.log10(step))))
    const h = svg.getAttribute('height')
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = X(t).toFixed(1)
      const g = document.createElementNS(svg.namespaceURI, 'g')
      g.setAttribute('class', 'tick')
      const line = document.createElementNS(svg.namespaceURI, 'line')
      line.setAttribute('x1', x)
      line.setAttribute('x2', x)
      line.setAttribute('y1', 18)
      line.setAttribute('y2', h)
      const text = document.createElementNS(svg.namespaceURI, 'text')
      text.setAttribute('x', x)
      text.setAttribute('y', 13)
      text.setAttribute('text-anchor', 'middle')
      text.textContent = (t / 1000).toFixed(digits) + ' s'
      g.appendChild(line)
      g.appendChild(text)
      ticks.appendChild(g)
    }
  }

  function timeAt (clientX) {
    const px = clientX - svg.getBoundingClientRect().left
    return v0 + (px - left) * (v1 - v0) / (right - left)
  }

  function zoom (f, t) {
    show(t - (t - v0) * f, t + (v1 - t) * f)
  }

  svg.addEventListener('wheel', function (e) {
    e.preventDefault()
    zoom(Math.exp(e.deltaY * 0.0015), timeAt(e.clientX))
  }, { passive: false })

  let drag = null
  svg.addEventListener('pointerdown', function (e) {
    drag = { x: e.clientX, v0: v0, v1: v1 }
    svg.setPointerCapture(e.pointerId)
    svg.classList.add('dragging')
  })
  svg.addEventListener('pointermove', function (e) {
    if (!drag) return
    const dt = (e.clientX - drag.x) * (drag.v1 - drag.v0) / (right - left)
    v0 = drag.v0 - dt
    v1 = drag.v1 - dt
    layout()
  })
  function stop () {
    drag = null
    svg.classList.remove('dragging')
  }
  svg.addEventListener('pointerup', stop)
  svg.addEventListener('pointercancel', stop)

  document.getElementById('zin').addEventListener('click', function () { zoom(0.5, (v0 + v1) / 2) })
  document.getElementById('zout').addEventListener('click', function () { zoom(2, (v0 + v1) / 2) })
  window.addEventListener('hashchange', function () {
    const v = fromHash()
    if (v) show(v[0], v[1])
  })
  window.addEventListener('resize', layout)

  const v = fromHash() || parse(svg.dataset.view) || [0, end]
  show(v[0], v[1])
  document.documentElement.dataset.height = String(Math.ceil(document.documentElement.getBoundingClientRect().height))
  document.documentElement.dataset.ready = 'ok'
})()
