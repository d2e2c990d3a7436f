// Places the timeline's elements for the interval shown. Every element with
// data-a (milliseconds since the start of the run) is put at that time; a
// rect with data-b as well spans to it; a text with data-sticky stays in
// view while its interval, data-a to data-b, is. The interval comes from #t=FROM-TO
// (seconds) in the address, else from the svg's data-view; the wheel zooms
// around the pointer, dragging pans, and the address follows.
(function () {
  'use strict'
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
        it.el.setAttribute('x', (x + 2).toFixed(1))
      } else {
        it.el.setAttribute('x', x.toFixed(1))
        it.el.setAttribute('width', Math.max(X(it.b) - x, 1.5).toFixed(1))
      }
    }
    clip.setAttribute('width', Math.max(right - left, 0))
    svg.classList.toggle('mid', k >= 0.12)
    svg.classList.toggle('near', k >= 4)
    drawTicks(X, k)
    shown.textContent = 'showing ' + (v0 / 1000).toFixed(3) + ' s to ' + (v1 / 1000).toFixed(3) + ' s'
    try {
      history.replaceState(null, '', '#t=' + (Math.max(v0, 0) / 1000).toFixed(3) + '-' + (v1 / 1000).toFixed(3))
    } catch (e) {
      // some browsers refuse it for file: pages; the view still works
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
  document.documentElement.dataset.ready = 'ok'
})()
