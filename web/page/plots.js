// Hand-written SVG line charts for the calculator (no libraries, no network).
// drawLineChart(svg, spec) replaces the content of an <svg> element with axes, grid lines,
// a legend and one polyline per series. The chart scales with its container (viewBox).
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';

function svgElement(name, attributes, text) {
  const element = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes || {})) {
    element.setAttribute(key, String(value));
  }
  if (text !== undefined) element.textContent = text;
  return element;
}

// About `count` round tick values covering [low, high] (1, 2, 5 times a power of ten).
function niceTicks(low, high, count) {
  if (!(high > low)) return [low];
  const rough = (high - low) / Math.max(1, count);
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) || 10 * power;
  const ticks = [];
  for (let t = Math.ceil(low / step - 1e-9) * step; t <= high + step * 1e-9; t += step) {
    ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

function formatTick(value) {
  if (value === 0) return '0';
  const magnitude = Math.abs(value);
  if (magnitude >= 1e5 || magnitude < 1e-3) return value.toExponential(0);
  return String(Number(value.toPrecision(6)));
}

// spec: {title, xLabel, yLabel, xDomain: [lo, hi] (optional), yDomain (optional),
//        legend: 'top-left' | 'top-right',
//        series: [{name, points: [[x, y], ...], color, dashed, dash, markers}]}
//        (dash: an SVG stroke-dasharray that overrides dashed)
// Points whose y is not a finite number are skipped (a gap, never a drawn NaN).
// At phone width (PHONE_QUERY, as style.css's) the legend goes below the plot instead of
// over it, and each chart is redrawn when the width crosses that line.
const PHONE_QUERY = '(max-width: 600px)';
const drawnCharts = new Map();  // svg -> its last spec
function phoneWidth() {
  return typeof window !== 'undefined' && window.matchMedia &&
      window.matchMedia(PHONE_QUERY).matches;
}
if (typeof window !== 'undefined' && window.matchMedia) {
  const query = window.matchMedia(PHONE_QUERY);
  const redraw = () => { for (const [svg, spec] of drawnCharts) drawLineChart(svg, spec); };
  if (query.addEventListener) query.addEventListener('change', redraw);
}

function drawLineChart(svg, spec) {
  drawnCharts.set(svg, spec);
  const legendBelow = phoneWidth();
  const rowHeight = legendBelow ? 30 : 24;
  const width = 640;
  const plotAreaHeight = 400;
  const height = plotAreaHeight + (legendBelow ? rowHeight * spec.series.length + 16 : 0);
  const margin = {left: 64, right: 16, top: 16, bottom: 52 + height - plotAreaHeight};
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.dataset.legend = legendBelow ? 'below' : 'inside';
  svg.setAttribute('role', 'img');
  if (spec.title) svg.appendChild(svgElement('title', {}, spec.title));

  const finite = [];
  for (const s of spec.series) {
    for (const [x, y] of s.points) {
      if (Number.isFinite(x) && Number.isFinite(y)) finite.push([x, y]);
    }
  }
  let [xLow, xHigh] = spec.xDomain ||
      [Math.min(...finite.map((p) => p[0])), Math.max(...finite.map((p) => p[0]))];
  let [yLow, yHigh] = spec.yDomain ||
      [0, Math.max(...finite.map((p) => p[1])) * 1.05];
  if (!Number.isFinite(xLow) || !Number.isFinite(xHigh)) [xLow, xHigh] = [0, 1];
  if (!Number.isFinite(yLow) || !Number.isFinite(yHigh)) [yLow, yHigh] = [0, 1];
  if (xHigh <= xLow) xHigh = xLow + 1;
  if (yHigh <= yLow) yHigh = yLow + 1;

  const plotWidth = width - margin.left - margin.right;
  const plotHeight = height - margin.top - margin.bottom;
  const sx = (x) => margin.left + (x - xLow) / (xHigh - xLow) * plotWidth;
  const sy = (y) => margin.top + (1 - (y - yLow) / (yHigh - yLow)) * plotHeight;

  const axes = svgElement('g', {class: 'axes'});
  for (const t of niceTicks(xLow, xHigh, 6)) {
    axes.appendChild(svgElement('line', {x1: sx(t), x2: sx(t), y1: margin.top,
      y2: margin.top + plotHeight, class: 'grid'}));
    axes.appendChild(svgElement('text', {x: sx(t), y: margin.top + plotHeight + 18,
      'text-anchor': 'middle', class: 'tick'}, formatTick(t)));
  }
  for (const t of niceTicks(yLow, yHigh, 5)) {
    axes.appendChild(svgElement('line', {x1: margin.left, x2: margin.left + plotWidth,
      y1: sy(t), y2: sy(t), class: 'grid'}));
    axes.appendChild(svgElement('text', {x: margin.left - 8, y: sy(t) + 4,
      'text-anchor': 'end', class: 'tick'}, formatTick(t)));
  }
  axes.appendChild(svgElement('rect', {x: margin.left, y: margin.top, width: plotWidth,
    height: plotHeight, class: 'frame'}));
  axes.appendChild(svgElement('text', {x: margin.left + plotWidth / 2, y: plotAreaHeight - 10,
    'text-anchor': 'middle', class: 'label'}, spec.xLabel));
  axes.appendChild(svgElement('text', {x: 16, y: margin.top + plotHeight / 2,
    'text-anchor': 'middle', class: 'label',
    transform: `rotate(-90 16 ${margin.top + plotHeight / 2})`}, spec.yLabel));
  svg.appendChild(axes);

  const clipId = 'clip-' + (svg.id || Math.random().toString(36).slice(2));
  const defs = svgElement('defs');
  const clip = svgElement('clipPath', {id: clipId});
  clip.appendChild(svgElement('rect', {x: margin.left, y: margin.top, width: plotWidth,
    height: plotHeight}));
  defs.appendChild(clip);
  svg.appendChild(defs);

  const lines = svgElement('g', {'clip-path': `url(#${clipId})`});
  for (const s of spec.series) {
    const segments = [[]];
    for (const [x, y] of s.points) {
      if (Number.isFinite(x) && Number.isFinite(y)) {
        segments[segments.length - 1].push(`${sx(x).toFixed(2)},${sy(y).toFixed(2)}`);
      } else if (segments[segments.length - 1].length) {
        segments.push([]);
      }
    }
    for (const segment of segments) {
      if (!segment.length) continue;
      lines.appendChild(svgElement('polyline', {points: segment.join(' '), fill: 'none',
        stroke: s.color, 'stroke-width': 2.5,
        'stroke-dasharray': s.dash || (s.dashed ? '7 5' : 'none'), class: 'series',
        'data-series': s.name}));
    }
    if (s.markers) {
      for (const [x, y] of s.points) {
        if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
        lines.appendChild(svgElement('circle', {cx: sx(x), cy: sy(y), r: 3.5,
          fill: s.color}));
      }
    }
  }
  svg.appendChild(lines);

  // Legend inside the plot (top-left or top-right), on a translucent box sized to its text;
  // below the plot, under the axis label, at phone width (where it would cover the curves).
  const legend = svgElement('g', {class: 'legend'});
  const box = svgElement('rect', {x: 0, y: 0, height: rowHeight * spec.series.length + 8,
                                  class: 'legend-box'});
  legend.appendChild(box);
  const texts = spec.series.map((s, i) => {
    const y = rowHeight * (i + 0.5) + 4;
    legend.appendChild(svgElement('line', {x1: 8, x2: 36, y1: y, y2: y, stroke: s.color,
      'stroke-width': 2.5, 'stroke-dasharray': s.dash || (s.dashed ? '7 5' : 'none')}));
    const text = svgElement('text', {x: 44, y: y + 5, class: 'legend-text'}, s.name);
    legend.appendChild(text);
    return text;
  });
  svg.appendChild(legend);
  // The text's rendered length (it depends on the CSS font size); an estimate if not shown.
  let textWidth = 0;
  for (const text of texts) {
    let length = 0;
    try { length = text.getComputedTextLength(); } catch (e) { length = 0; }
    textWidth = Math.max(textWidth, length || 7.5 * text.textContent.length);
  }
  const legendWidth = Math.min((legendBelow ? width - 16 : plotWidth - 16), 44 + textWidth + 10);
  box.setAttribute('width', legendWidth);
  if (legendBelow) {
    legend.setAttribute('transform', `translate(8 ${plotAreaHeight + 4})`);
    return;
  }
  const legendX = spec.legend === 'top-right' ?
      margin.left + plotWidth - legendWidth - 8 : margin.left + 8;
  legend.setAttribute('transform', `translate(${legendX} ${margin.top + 8})`);
}

if (typeof module !== 'undefined' && module.exports) {
  module.exports = {niceTicks, formatTick};
}
