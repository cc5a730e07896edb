/* bundle-mcp view: the page's own script.
 *
 * Reads the JSON block the generator wrote (#okfv-data), draws the graph with Cytoscape and
 * shows one concept at a time in the detail pane. Every text from the bundle goes into the page
 * through textContent, never as markup; the one exception, a concept's rendered Markdown, was
 * made safe by the generator and is sanitised again here with DOMPurify before it is inserted.
 * The page makes no request of any kind (its Content-Security-Policy would refuse one).
 */
(function () {
  'use strict';

  var timings = { start: performance.now() };
  var DATA = JSON.parse(document.getElementById('okfv-data').textContent);
  timings.parsed = performance.now();
  var META = DATA.meta;
  var CONCEPTS = DATA.concepts;
  var KINDS = DATA.edge_kinds;
  var EDGES = DATA.edges;
  var FOLDERS = DATA.folders;
  var N = CONCEPTS.length;
  // A big graph draws its edges itself, as plain lines on a canvas under Cytoscape's: Cytoscape
  // spends about a third of a millisecond on each edge element it holds, so the 10,000 edges
  // of a 1,000-concept bundle would take seconds to appear and slow every pan.
  var HEAVY = EDGES.length > 2500 || N > 600;
  var NARROW = window.matchMedia('(max-width: 860px)');

  var byId = new Map();
  var folderByPath = new Map();
  var outgoing = [];
  var incoming = [];
  CONCEPTS.forEach(function (c, i) {
    c.i = i;
    byId.set(c.id, c);
    outgoing.push([]);
    incoming.push([]);
  });
  FOLDERS.forEach(function (f) { folderByPath.set(f.path, f); });
  EDGES.forEach(function (e, j) { outgoing[e[0]].push(j); incoming[e[1]].push(j); });

  // ------------------------------------------------------------------------------------------
  // Facets: what the filters, the colours and the legend are about.

  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#86bcb6', '#d37295', '#a0cbe8'];
  var OTHER = '#bab0ac';
  var FIXED = {
    status: [['stable', '#4e79a7'], ['draft', '#edc948'], ['deprecated', '#9c755f'],
      ['invalid', '#d7263d']],
    trust: [['human-reviewed', '#1a9850'], ['machine-confirmed', '#4575b4'],
      ['unverified', '#bdbdbd']],
    stale: [['stale', '#d7263d'], ['due', '#f28e2b'], ['fresh', '#59a14f'], ['none', '#9aa5b1'],
      ['invalid', '#8e44ad']],
    orphan: [['orphan', '#d7263d'], ['listed', '#4e79a7']]
  };
  var LABELS = {
    stale: { stale: 'stale', due: 'stale within 30 days', fresh: 'fresh',
      none: 'no stale_after', invalid: 'unreadable stale_after' },
    orphan: { orphan: 'orphan (not in its index.md)', listed: 'listed in its index.md' },
    status: { invalid: 'invalid status' }
  };
  var FACETS = {
    type: { label: 'Type', value: function (c) { return c.type || '(no type)'; } },
    status: { label: 'Status', value: function (c) { return c.status; } },
    trust: { label: 'Trust tier', value: function (c) { return c.trust; } },
    stale: { label: 'Staleness', value: function (c) { return c.stale.state; } },
    orphan: { label: 'Orphans', value: function (c) { return c.orphan ? 'orphan' : 'listed'; } },
    folder: { label: 'Top folder',
      value: function (c) { return c.folder ? c.folder.split('/')[0] : '(root)'; } }
  };
  var FILTERED = ['type', 'status', 'trust', 'stale'];

  function valueLabel(facet, value) {
    return (LABELS[facet] && LABELS[facet][value]) || value;
  }

  // Each facet's values with their counts and colours, most frequent first for the open ones.
  var facetValues = {};
  Object.keys(FACETS).forEach(function (facet) {
    var counts = new Map();
    CONCEPTS.forEach(function (c) {
      var v = FACETS[facet].value(c);
      counts.set(v, (counts.get(v) || 0) + 1);
    });
    var list;
    if (FIXED[facet]) {
      list = FIXED[facet].filter(function (p) { return counts.has(p[0]); }).map(function (p) {
        return { value: p[0], colour: p[1], count: counts.get(p[0]) };
      });
    } else {
      list = Array.from(counts.keys()).sort(function (a, b) {
        return counts.get(b) - counts.get(a) || (a < b ? -1 : a > b ? 1 : 0);
      }).map(function (v, k) {
        return { value: v, colour: k < PALETTE.length ? PALETTE[k] : OTHER, count: counts.get(v) };
      });
    }
    var colours = new Map();
    list.forEach(function (item) { colours.set(item.value, item.colour); });
    facetValues[facet] = { list: list, colours: colours };
  });

  var state = {
    colourBy: 'type',
    hidden: { type: new Set(), status: new Set(), trust: new Set(), stale: new Set() },
    orphans: 'all',
    selected: -1,
    budgetMode: N > META.node_budget,
    budget: META.node_budget,
    expanded: [], // budget mode: folders opened, oldest first
    taken: new Map(), // budget mode: folder -> how many of its own concepts are shown
    pinned: [], // budget mode: concepts shown by a selection, oldest first
    force: false
  };

  function colourOf(c) {
    var colour = facetValues[state.colourBy].colours.get(FACETS[state.colourBy].value(c));
    return colour || OTHER;
  }

  function passes(c) {
    if (c.i === state.selected) return true; // the selected concept is never filtered away
    for (var k = 0; k < FILTERED.length; k++) {
      var facet = FILTERED[k];
      if (state.hidden[facet].has(FACETS[facet].value(c))) return false;
    }
    if (state.orphans === 'only' && !c.orphan) return false;
    if (state.orphans === 'hide' && c.orphan) return false;
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Small DOM helpers: text always goes in as text.

  function el(tag, props) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (key) {
        var value = props[key];
        if (value === undefined || value === null || value === false) return;
        if (key === 'class') node.className = value;
        else if (key === 'text') node.textContent = value;
        else if (key.slice(0, 2) === 'on') node.addEventListener(key.slice(2), value);
        else node.setAttribute(key, value === true ? '' : String(value));
      });
    }
    for (var k = 2; k < arguments.length; k++) append(node, arguments[k]);
    return node;
  }

  function append(node, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  function $(id) { return document.getElementById(id); }

  function plural(n, word) { return n.toLocaleString('en') + ' ' + word + (n === 1 ? '' : 's'); }

  function isWebUrl(text) { return /^https?:\/\/[^\s]+$/i.test(String(text).trim()); }

  function conceptHash(id, at) {
    var h = '#concept=' + encodeURIComponent(id).replace(/%2F/g, '/');
    return at ? h + '&at=' + encodeURIComponent(at) : h;
  }

  function folderHash(path) {
    return '#folder=' + encodeURIComponent(path).replace(/%2F/g, '/');
  }

  // ------------------------------------------------------------------------------------------
  // The graph

  var cy = cytoscape({
    container: $('okfv-graph'),
    elements: [],
    layout: { name: 'preset' },
    minZoom: 0.02,
    maxZoom: 5,
    boxSelectionEnabled: false,
    autounselectify: true,
    style: graphStyle()
  });

  // A folder's name is sized in model units, so it reads from afar; close up it would cover the
  // concepts drawn over its box, so on screen it never grows past FOLDER_LABEL_PX.
  var FOLDER_LABEL_PX = 26;

  function folderFont(ele) {
    return Math.min(ele.data('fs'), FOLDER_LABEL_PX / ele.cy().zoom());
  }

  function graphStyle() {
    var edge = {
      width: 1, 'line-color': '#aab2bf', opacity: 0.75, 'z-index': 5, 'z-index-compare': 'manual',
      'curve-style': 'bezier', 'target-arrow-shape': 'triangle', 'target-arrow-color': '#aab2bf',
      'arrow-scale': 0.7
    };
    return [
      { selector: 'node.concept', style: {
        'background-color': 'data(colour)', width: 'data(size)', height: 'data(size)',
        label: 'data(label)', 'font-size': 11, 'min-zoomed-font-size': 7, color: '#1d2330',
        'text-valign': 'bottom', 'text-margin-y': 3, 'text-wrap': 'ellipsis',
        'text-max-width': 130, 'text-background-color': '#ffffff',
        'text-background-opacity': 0.75, 'text-background-padding': 1,
        'border-width': 1, 'border-color': '#ffffff', 'z-index': 10, 'z-index-compare': 'manual'
      } },
      { selector: 'node.concept.orphan', style: {
        'border-width': 2.5, 'border-color': '#c62828', 'border-style': 'dashed'
      } },
      { selector: 'node.folder', style: {
        shape: 'round-rectangle', width: 'data(w)', height: 'data(h)',
        'background-color': '#e9edf3', 'background-opacity': 0.5, 'border-width': 1,
        'border-color': '#c3cad6', label: 'data(label)', 'font-size': folderFont,
        'text-valign': 'top', 'text-halign': 'center',
        'text-margin-y': function (ele) { return folderFont(ele) + 6; },
        color: '#4a5366', 'font-weight': 600, 'min-zoomed-font-size': 5, 'z-index': 1,
        'z-index-compare': 'manual', 'text-max-width': 'data(w)', 'text-wrap': 'ellipsis',
        'text-background-color': '#fbfcfd', 'text-background-opacity': 0.8,
        'text-background-padding': 2
      } },
      { selector: 'node.folder.collapsed', style: {
        'background-color': '#d9e1ee', 'background-opacity': 0.9, 'border-color': '#8d9ab0',
        'border-width': 2, 'text-valign': 'center', 'text-margin-y': 0
      } },
      // Over the edge layer a box is only an outline: a tinted box would pale the lines under
      // it and leave dark bands in the gaps between boxes.
      { selector: 'node.folder.expanded', style: { 'background-opacity': HEAVY ? 0 : 0.5 } },
      { selector: 'edge', style: edge },
      { selector: 'edge.relation', style: { 'line-color': '#44546a', 'target-arrow-color': '#44546a' } },
      { selector: 'edge.field', style: {
        'line-style': 'dashed', 'line-color': '#7a5fb0', 'target-arrow-color': '#7a5fb0'
      } },
      { selector: 'edge.agg', style: { width: 'data(w)', opacity: 0.45 } },
      { selector: '.hidden', style: { display: 'none' } },
      { selector: '.faded', style: { opacity: 0.15 } },
      { selector: 'edge.hot', style: {
        opacity: 1, width: 2.2, 'line-color': '#2457c5', 'target-arrow-color': '#2457c5',
        'z-index': 20
      } },
      { selector: 'node.concept.near', style: { 'min-zoomed-font-size': 0, 'z-index': 25 } },
      { selector: 'node.concept.selected', style: {
        'border-width': 4, 'border-color': '#111111', 'border-style': 'solid', 'z-index': 30,
        'font-size': 13, 'font-weight': 700, 'min-zoomed-font-size': 0
      } }
    ];
  }

  function conceptNode(c) {
    var size = Math.min(44, 16 + 5 * Math.sqrt(c.inbound));
    return {
      group: 'nodes',
      data: { id: 'c' + c.i, label: c.title, colour: colourOf(c), size: size, ci: c.i },
      position: { x: c.x, y: c.y },
      classes: 'concept' + (c.orphan ? ' orphan' : '')
    };
  }

  function folderNode(f, collapsed) {
    var box = f.box;
    // In model units: a closed folder is read from afar, so its name is set larger.
    var fs = collapsed ? Math.max(14, Math.min(90, box[2] / 10)) : Math.max(12, Math.min(36, box[2] / 16));
    var label = collapsed ? f.name + '  (' + f.total.toLocaleString('en') + ')' : f.name;
    return {
      group: 'nodes',
      data: { id: 'f:' + f.path, label: label, w: box[2], h: box[3], fs: fs, path: f.path },
      position: { x: box[0] + box[2] / 2, y: box[1] + box[3] / 2 },
      classes: 'folder ' + (collapsed ? 'collapsed' : 'expanded'),
      grabbable: false
    };
  }

  function isExpanded(path) { return !state.budgetMode || state.expanded.indexOf(path) >= 0; }

  function ancestors(path) {
    // "a/b/c" -> ["a", "a/b", "a/b/c"]
    if (!path) return [];
    var parts = path.split('/');
    return parts.map(function (_, k) { return parts.slice(0, k + 1).join('/'); });
  }

  function folderVisible(path) {
    var up = ancestors(path);
    for (var k = 0; k < up.length - 1; k++) if (!isExpanded(up[k])) return false;
    return true;
  }

  // Which concepts are in the graph: all of them, or (over the budget) the opened folders'
  // share plus the concepts a selection pinned.
  function shownSet() {
    var shown = new Set();
    if (!state.budgetMode) { for (var i = 0; i < N; i++) shown.add(i); return shown; }
    state.expanded.forEach(function (path) {
      if (!folderVisible(path)) return;
      ownConcepts(path).slice(0, state.taken.get(path) || 0).forEach(function (i) { shown.add(i); });
    });
    state.pinned.forEach(function (i) { shown.add(i); });
    if (state.selected >= 0) shown.add(state.selected);
    return shown;
  }

  var ownCache = new Map();
  function ownConcepts(path) {
    // A folder's own concepts, most linked first: the ones shown when the budget cuts.
    var found = ownCache.get(path);
    if (!found) {
      found = [];
      CONCEPTS.forEach(function (c) { if (c.folder === path) found.push(c.i); });
      found.sort(function (a, b) { return CONCEPTS[b].inbound - CONCEPTS[a].inbound || a - b; });
      ownCache.set(path, found);
    }
    return found;
  }

  function representative(i, shown) {
    // The graph element that stands for concept i: itself, or the closed folder holding it.
    if (shown.has(i)) return 'c' + i;
    var up = ancestors(CONCEPTS[i].folder);
    for (var k = 0; k < up.length; k++) if (!isExpanded(up[k])) return 'f:' + up[k];
    return null;
  }

  var KIND_RANK = { relation: 3, field: 2, link: 1 };

  function wantedElements() {
    var shown = shownSet();
    var nodes = [];
    FOLDERS.forEach(function (f) {
      if (folderVisible(f.path)) nodes.push(folderNode(f, !isExpanded(f.path)));
    });
    shown.forEach(function (i) { nodes.push(conceptNode(CONCEPTS[i])); });
    var edges = new Map();
    EDGES.forEach(function (e) {
      var a = representative(e[0], shown);
      var b = representative(e[1], shown);
      if (a === null || b === null || a === b) return;
      var group = KINDS[e[2]].group;
      var key = HEAVY && b < a ? b + '|' + a : a + '|' + b; // no arrows: one line per pair
      var found = edges.get(key);
      if (found) {
        found.data.n += 1;
        if (KIND_RANK[group] > KIND_RANK[found.data.group]) found.data.group = group;
        return;
      }
      edges.set(key, { group: 'edges', data: { id: 'e:' + key, source: a, target: b, n: 1,
        group: group, agg: a.charAt(0) === 'f' || b.charAt(0) === 'f' } });
    });
    var edgeList = [];
    edges.forEach(function (json) {
      json.classes = json.data.agg ? 'agg ' + json.data.group : json.data.group;
      json.data.w = Math.min(8, 1 + Math.log2(json.data.n));
      edgeList.push(json);
    });
    return { shown: shown, nodes: nodes, edges: edgeList };
  }

  function syncGraph() {
    var want = wantedElements();
    var ids = new Map();
    if (HEAVY) setLayerEdges(want.edges);
    want.nodes.concat(HEAVY ? [] : want.edges).forEach(function (json) { ids.set(json.data.id, json); });
    cy.batch(function () {
      cy.elements().forEach(function (ele) {
        if (ele.removed()) return;
        var json = ids.get(ele.id());
        if (!json) { ele.remove(); return; }
        if (ele.hasClass('folder')) {
          ele.data(json.data);
          ele.classes(json.classes);
        }
        ids.delete(ele.id());
      });
      var add = [];
      ids.forEach(function (json) { if (json.group === 'nodes') add.push(json); });
      ids.forEach(function (json) { if (json.group === 'edges') add.push(json); });
      if (add.length) cy.add(add);
    });
    if (state.force) restorePositions();
    applyFilters();
    applySelection();
    updateStatus(want.shown.size);
  }

  // ------------------------------------------------------------------------------------------
  // The edge layer of a big graph: one canvas under Cytoscape's, redrawn on every frame the
  // viewport or a node moves; the selected concept's edges are drawn last, in the accent colour.

  var layer = { canvas: null, groups: { link: [], field: [], relation: [] }, agg: [], pending: false };
  var LAYER_STYLE = { link: ['#8d97a8', 0.22, []], field: ['#7a5fb0', 0.45, [4, 3]],
    relation: ['#44546a', 0.4, []] };

  // The folder names' size depends on the zoom: restyle the folders once per frame it changes.
  var folderRestyle = false;
  cy.on('zoom', function () {
    if (folderRestyle) return;
    folderRestyle = true;
    requestAnimationFrame(function () {
      folderRestyle = false;
      cy.nodes('.folder').updateStyle();
    });
  });

  if (HEAVY) {
    layer.canvas = document.createElement('canvas');
    layer.canvas.id = 'okfv-edges';
    layer.canvas.setAttribute('aria-hidden', 'true');
    $('okfv-graph-area').insertBefore(layer.canvas, $('okfv-graph'));
    cy.on('viewport resize render', scheduleLayer);
    cy.on('position', 'node', scheduleLayer);
  }

  function setLayerEdges(edges) {
    layer.groups = { link: [], field: [], relation: [] };
    layer.agg = [];
    edges.forEach(function (e) {
      var d = e.data;
      (d.agg ? layer.agg : layer.groups[d.group]).push(d);
    });
    scheduleLayer();
  }

  function scheduleLayer() {
    if (!HEAVY || layer.pending) return;
    layer.pending = true;
    requestAnimationFrame(drawLayer);
  }

  function drawLayer() {
    layer.pending = false;
    var canvas = layer.canvas;
    var dpr = window.devicePixelRatio || 1;
    var w = cy.width();
    var h = cy.height();
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
      canvas.style.width = w + 'px';
      canvas.style.height = h + 'px';
    }
    var ctx = canvas.getContext('2d');
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    var pos = new Map();
    cy.nodes().forEach(function (n) { if (!n.hasClass('hidden')) pos.set(n.id(), n.position()); });
    var zoom = cy.zoom();
    var pan = cy.pan();
    ctx.setTransform(zoom * dpr, 0, 0, zoom * dpr, pan.x * dpr, pan.y * dpr);
    var selected = state.selected >= 0 ? 'c' + state.selected : null;
    var hot = [];
    function stroke(list, colour, alpha, dash, width) {
      ctx.beginPath();
      list.forEach(function (d) {
        var a = pos.get(d.source);
        var b = pos.get(d.target);
        if (!a || !b) return;
        if (selected && (d.source === selected || d.target === selected) && width !== 2.2) {
          hot.push(d);
          return;
        }
        ctx.moveTo(a.x, a.y);
        ctx.lineTo(b.x, b.y);
      });
      ctx.globalAlpha = alpha;
      ctx.strokeStyle = colour;
      ctx.lineWidth = width / zoom;
      ctx.setLineDash(dash.map(function (x) { return x / zoom; }));
      ctx.stroke();
    }
    Object.keys(LAYER_STYLE).forEach(function (group) {
      var style = LAYER_STYLE[group];
      stroke(layer.groups[group], style[0], selected ? 0.07 : style[1], style[2], 1);
    });
    if (layer.agg.length) stroke(layer.agg, '#8d97a8', selected ? 0.1 : 0.35, [], 2);
    stroke(hot, '#2457c5', 0.95, [], 2.2);
  }

  function layerNeighbours(i) {
    var me = 'c' + i;
    var found = new Set();
    [layer.groups.link, layer.groups.field, layer.groups.relation].forEach(function (list) {
      list.forEach(function (d) {
        if (d.source === me) found.add(d.target);
        else if (d.target === me) found.add(d.source);
      });
    });
    return found;
  }

  function conceptElement(i) { return cy.getElementById('c' + i); }

  function applyFilters() {
    cy.batch(function () {
      cy.nodes('.concept').forEach(function (n) {
        // Only real changes: a class change restyles the element and its edges.
        var hide = !passes(CONCEPTS[n.data('ci')]);
        if (n.hasClass('hidden') !== hide) n.toggleClass('hidden', hide);
      });
    });
    updateStatus();
    renderLegend();
    scheduleLayer();
  }

  function applySelection() {
    cy.batch(function () {
      cy.$('.selected, .near, .faded, .hot').removeClass('selected near faded hot');
      if (state.selected < 0) return;
      var node = conceptElement(state.selected);
      if (node.empty()) return;
      node.addClass('selected');
      if (HEAVY) {
        // The layer draws the edges; here only the neighbours keep their labels.
        layerNeighbours(state.selected).forEach(function (id) {
          cy.getElementById(id).filter('.concept').addClass('near');
        });
        return;
      }
      var around = node.closedNeighborhood();
      cy.elements('node.concept, edge').difference(around).addClass('faded');
      node.connectedEdges().addClass('hot');
      node.neighborhood('node.concept').addClass('near');
    });
    scheduleLayer();
  }

  function recolour() {
    cy.batch(function () {
      cy.nodes('.concept').forEach(function (n) { n.data('colour', colourOf(CONCEPTS[n.data('ci')])); });
    });
    renderLegend();
  }

  function fit(nodes) {
    // Fitted from the positions and sizes the data gives: asking Cytoscape for a bounding box
    // measures every label, which costs seconds at 1,000 concepts.
    var x1 = Infinity, y1 = Infinity, x2 = -Infinity, y2 = -Infinity;
    (nodes || cy.nodes()).forEach(function (n) {
      if (n.hasClass('hidden')) return;
      var p = n.position();
      var w = n.hasClass('folder') ? n.data('w') : n.data('size') + 60;
      var h = n.hasClass('folder') ? n.data('h') : n.data('size') + 30;
      x1 = Math.min(x1, p.x - w / 2); x2 = Math.max(x2, p.x + w / 2);
      y1 = Math.min(y1, p.y - h / 2); y2 = Math.max(y2, p.y + h / 2);
    });
    if (!isFinite(x1)) return;
    var pad = 24;
    var zoom = Math.min((cy.width() - 2 * pad) / (x2 - x1), (cy.height() - 2 * pad) / (y2 - y1));
    zoom = Math.max(cy.minZoom(), Math.min(1.5, zoom)); // a tiny bundle is not blown up
    cy.viewport({ zoom: zoom, pan: { x: (cy.width() - zoom * (x1 + x2)) / 2,
      y: (cy.height() - zoom * (y1 + y2)) / 2 } });
  }

  function zoomBy(factor) {
    cy.zoom({ level: cy.zoom() * factor,
      renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
  }

  function reveal(node) {
    // Bring a node into view without changing the zoom, unless it is out of sight.
    // In a big graph, also zoom in far enough to read the neighbours' names.
    var extent = cy.extent();
    var p = node.position();
    var inside = p.x > extent.x1 && p.x < extent.x2 && p.y > extent.y1 && p.y < extent.y2;
    var zoom = cy.zoom() < 0.35 && N > 60 ? 0.8 : cy.zoom();
    if (inside && zoom === cy.zoom()) return;
    cy.viewport({ zoom: zoom, pan: { x: cy.width() / 2 - p.x * zoom, y: cy.height() / 2 - p.y * zoom } });
  }

  function restorePositions() {
    state.force = false;
    $('okfv-layout').textContent = 'Force';
    cy.batch(function () {
      cy.nodes('.concept').forEach(function (n) {
        var c = CONCEPTS[n.data('ci')];
        n.position({ x: c.x, y: c.y });
      });
      cy.nodes('.folder').removeClass('hidden');
    });
  }

  function toggleLayout() {
    if (state.force) { restorePositions(); fit(); return; }
    state.force = true;
    $('okfv-layout').textContent = 'Folders';
    cy.nodes('.folder').addClass('hidden');
    var shown = cy.elements('node.concept:visible, edge:visible').filter(function (e) {
      return e.isNode() || (!e.hasClass('agg'));
    });
    // Bounded: the iterations, not convergence, decide how long it takes.
    shown.layout({ name: 'cose', animate: false, randomize: false, fit: true, padding: 30,
      numIter: N > 500 ? 250 : 800, nodeRepulsion: function () { return 9000; },
      idealEdgeLength: function () { return 70; }, componentSpacing: 80,
      nodeDimensionsIncludeLabels: false }).run();
  }

  // ------------------------------------------------------------------------------------------
  // The node budget: open a folder, pin a selection, never more than the budget at once.

  function budgetRoom() { return state.budget - shownSet().size; }

  function makeRoom(need, keepFolder) {
    while (budgetRoom() < need && state.pinned.length) state.pinned.shift();
    var k = 0;
    while (budgetRoom() < need && k < state.expanded.length) {
      var path = state.expanded[k];
      var keep = keepFolder && (keepFolder === path || keepFolder.indexOf(path + '/') === 0);
      if (keep) { k++; continue; }
      state.expanded.splice(k, 1);
      state.taken.delete(path);
    }
  }

  function expandFolder(path) {
    ancestors(path).forEach(function (p) {
      if (state.expanded.indexOf(p) >= 0) return;
      var own = ownConcepts(p).length;
      makeRoom(Math.min(own, state.budget), p);
      state.expanded.push(p);
      var take = Math.max(0, Math.min(own, budgetRoom()));
      state.taken.set(p, take);
      if (take < own) {
        notice('Showing ' + take.toLocaleString('en') + ' of ' + plural(own, 'concept') +
          ' in ' + p + ' (node budget ' + state.budget.toLocaleString('en') +
          '): search to reach the others, or double-click an open folder to close it.');
      }
    });
    syncGraph();
  }

  function collapseFolder(path) {
    state.expanded = state.expanded.filter(function (p) {
      return p !== path && p.indexOf(path + '/') !== 0;
    });
    syncGraph();
  }

  function pinConcept(i) {
    if (!shownSet().has(i)) {
      makeRoom(1);
      state.pinned.push(i);
    }
    // A few of its neighbours, most linked first, as far as the budget allows (never
    // dropping anything for them).
    var near = new Set();
    outgoing[i].concat(incoming[i]).forEach(function (j) {
      var e = EDGES[j];
      near.add(e[0] === i ? e[1] : e[0]);
    });
    var shown = shownSet();
    Array.from(near).filter(function (k) { return !shown.has(k); }).sort(function (a, b) {
      return CONCEPTS[b].inbound - CONCEPTS[a].inbound || a - b;
    }).slice(0, Math.max(0, Math.min(12, budgetRoom()))).forEach(function (k) {
      state.pinned.push(k);
    });
  }

  function resetBudgetView() {
    state.expanded = [];
    state.taken = new Map();
    state.pinned = [];
    // Start from the root's own concepts, as many as the budget holds.
    var root = ownConcepts('');
    if (root.length) { state.expanded.push(''); state.taken.set('', Math.min(root.length, state.budget)); }
    syncGraph();
    fit();
    notice('This bundle has more concepts (' + N.toLocaleString('en') + ') than the node budget (' +
      state.budget.toLocaleString('en') + '): click a folder to open it, or search.');
  }

  var noticeTimer = 0;
  function notice(text) {
    var box = $('okfv-notice');
    box.textContent = text;
    box.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(function () { box.hidden = true; }, 9000);
  }

  function updateStatus(shownCount) {
    var shown = shownCount === undefined ? cy.nodes('.concept').length : shownCount;
    var visible = cy.nodes('.concept').filter(function (n) { return !n.hasClass('hidden'); }).length;
    var parts = [];
    if (state.budgetMode) {
      parts.push('showing ' + shown.toLocaleString('en') + ' of ' + plural(N, 'concept') +
        ' (node budget ' + state.budget.toLocaleString('en') + ')');
    } else {
      parts.push(plural(N, 'concept'));
      parts.push(plural(META.edges, 'edge'));
    }
    if (visible < shown) parts.push(visible.toLocaleString('en') + ' pass the filters');
    parts.push('as of ' + META.as_of);
    $('okfv-status').textContent = parts.join(' · ');
  }

  // ------------------------------------------------------------------------------------------
  // Selection and the address bar: #concept=ID[&at=anchor] or #folder=PATH

  function parseHash() {
    var out = {};
    location.hash.replace(/^#/, '').split('&').forEach(function (part) {
      var k = part.indexOf('=');
      if (k <= 0) return;
      try { out[part.slice(0, k)] = decodeURIComponent(part.slice(k + 1)); } catch (err) { /* not ours */ }
    });
    return out;
  }

  function go(id, at) {
    var target = conceptHash(id, at);
    if (location.hash === target) route(); else location.hash = target;
  }

  function route() {
    var params = parseHash();
    if (params.concept !== undefined) {
      var c = byId.get(params.concept);
      if (c) { select(c.i); if (params.at) scrollToAnchor(params.at); }
    } else if (params.folder !== undefined) {
      showFolder(params.folder);
    } else if (state.selected >= 0) {
      deselect();
    }
  }

  function select(i) {
    if (state.budgetMode) {
      pinConcept(i);
      state.selected = i;
      syncGraph();
    } else {
      state.selected = i;
      applyFilters();
      applySelection();
    }
    var node = conceptElement(i);
    if (node.nonempty()) reveal(node);
    renderDetail(CONCEPTS[i]);
  }

  function deselect() {
    state.selected = -1;
    applyFilters();
    applySelection();
    $('okfv-detail').hidden = true;
    $('okfv-pane-empty').hidden = false;
    if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  }

  function showFolder(path) {
    if (state.budgetMode && path) expandFolder(path);
    var box = cy.getElementById('f:' + path);
    if (box.nonempty()) fit(box); else fit();
  }

  function step(delta) {
    // The next (or previous) concept, in ID order, among those the filters let through.
    var order = CONCEPTS.filter(passes);
    if (!order.length) return;
    var at = order.findIndex(function (c) { return c.i === state.selected; });
    var next = at < 0 ? (delta > 0 ? 0 : order.length - 1) : (at + delta + order.length) % order.length;
    go(order[next].id);
  }

  // ------------------------------------------------------------------------------------------
  // The detail pane

  var PURIFY = {
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
    FORBID_TAGS: ['style', 'img', 'svg', 'math', 'form', 'input', 'button', 'textarea', 'select',
      'option', 'iframe', 'frame', 'object', 'embed', 'video', 'audio', 'picture', 'source',
      'link', 'meta', 'base', 'template'],
    FORBID_ATTR: ['style', 'srcset', 'action', 'formaction', 'background', 'poster'],
    RETURN_DOM_FRAGMENT: true
  };

  function badge(text, tone, title) {
    return el('span', { class: 'okfv-badge' + (tone ? ' okfv-' + tone : ''), title: title }, text);
  }

  function card(title, body, open) {
    if (open === undefined) {
      return el('section', { class: 'okfv-card' }, el('h3', { text: title }),
        el('div', { class: 'okfv-card-body' }, body));
    }
    return el('details', { class: 'okfv-card', open: open },
      el('summary', { text: title }), el('div', { class: 'okfv-card-body' }, body));
  }

  function dl(rows) {
    var list = el('dl');
    rows.forEach(function (row) {
      if (row[1] === undefined || row[1] === null || row[1] === '') return;
      list.appendChild(el('dt', { text: row[0] }));
      list.appendChild(el('dd', null, row[1]));
    });
    return list;
  }

  function conceptButton(id, text) {
    var c = byId.get(id);
    return el('button', { type: 'button', class: 'okfv-go', title: id,
      onclick: function () { go(id); } }, text || (c ? c.title : id));
  }

  function reading(value) {
    // A path-valued field: a URL (linked for http and https), a scope, or a bundle path.
    if (!value) return null;
    if (value.kind === 'url') {
      if (value.safe_url && isWebUrl(value.raw)) {
        return el('a', { href: value.raw.trim(), target: '_blank', rel: 'noopener noreferrer nofollow' },
          value.raw);
      }
      return el('span', null, value.raw);
    }
    if (value.kind === 'scope') return el('span', { class: 'okfv-muted' }, 'scope: ' + value.raw);
    if (value.concept && byId.has(value.concept)) return conceptButton(value.concept, value.raw);
    if (value.exists) return el('span', { title: value.path }, value.raw + ' (a file of the bundle)');
    return el('span', { class: 'okfv-problem' }, value.raw + ' — names no file of the bundle' +
      (value.root_reading ? '; did you mean ' + value.root_reading + '?' : ''));
  }

  function staleText(s) {
    if (s.state === 'none') return 'no stale_after: does not go stale';
    if (s.state === 'invalid') return 'stale_after ' + (s.raw || '') + ' is not a date or an instant';
    var days = s.days_left;
    if (s.state === 'stale') {
      return 'stale since ' + s.stale_after + (days !== null ? ' (' + plural(-days, 'day') + ' ago)' : '');
    }
    return 'fresh until ' + s.stale_after + (days !== null ? ' (' + plural(days, 'day') + ' left)' : '');
  }

  function renderDetail(c) {
    var detail = $('okfv-detail');
    detail.textContent = '';
    var stale = c.stale;
    var staleTone = { stale: 'bad', due: 'meh', fresh: 'good', invalid: 'bad' }[stale.state];
    var trustTone = { 'human-reviewed': 'good', 'machine-confirmed': '', unverified: 'meh' }[c.trust];
    append(detail, [
      el('h2', { id: 'okfv-detail-title', tabindex: '-1' }, c.title),
      el('div', { class: 'okfv-id', title: c.path }, c.id),
      el('div', { class: 'okfv-badges' },
        badge([el('b', null, 'type '), c.type || '(none)']),
        badge([el('b', null, 'status '), c.status === 'invalid' ? 'invalid: ' + c.status_raw : c.status],
          c.status === 'invalid' ? 'bad' : (c.status === 'deprecated' ? 'meh' : '')),
        badge([el('b', null, 'trust '), c.trust], trustTone),
        badge([el('b', null, 'staleness '), valueLabel('stale', stale.state)], staleTone,
          'as of ' + META.as_of),
        c.orphan ? badge('orphan: not listed in its folder\u2019s index.md', 'bad') : null,
        c.broken.length ? badge(plural(c.broken.length, 'broken link'), 'bad') : null),
      c.description ? el('p', { class: 'okfv-desc' }, c.description) : null,
      c.tags.length ? el('div', { class: 'okfv-tags', 'aria-label': 'Tags' },
        c.tags.map(function (t) { return el('span', { class: 'okfv-tag' }, t); })) : null
    ]);
    append(detail, card('Status, trust and staleness', dl([
      ['status', c.status_raw === null ? 'stable (no status field)' : c.status_raw +
        (c.status === 'invalid' ? ' (not draft, stable or deprecated)' : '')],
      ['trust tier', c.trust],
      ['verified', c.verified.length ? el('ul', null, c.verified.map(function (v) {
        return el('li', null, (v.by || '?') + (v.at ? ' at ' + v.at : '') + (v.note ? ' — ' + v.note : ''));
      })) : 'never'],
      ['generated', c.generated ? Object.keys(c.generated).map(function (k) {
        return k + ': ' + c.generated[k];
      }).join(', ') : null],
      ['as of ' + META.as_of, staleText(stale)],
      ['resource', reading(c.resource)],
      ['file', c.path]
    ])));
    if (c.sources.length) {
      append(detail, card('Sources (' + c.sources.length + ')', el('ul', null, c.sources.map(function (s) {
        if (s.text !== undefined) return el('li', null, s.text);
        var head = s.title || s.id || '(untitled)';
        return el('li', null, el('div', null, el('b', null, head), s.id && s.title ? ' [' + s.id + ']' : ''),
          s.resource ? el('div', null, reading(s.resource)) : null,
          el('div', { class: 'okfv-muted' }, [s.author, s.last_modified ? 'modified ' + s.last_modified : null,
            s.usage_count ? 'used ' + s.usage_count + '×' : null].filter(Boolean).join(' · ')));
      }))));
    }
    if (c.computation) append(detail, computationCard(c.computation));
    append(detail, linksCard(c));
    if (c.broken.length) {
      append(detail, card('Broken links (' + c.broken.length + ')', el('ul', null, c.broken.map(function (b) {
        return el('li', { class: 'okfv-problem' }, (b.line ? 'line ' + b.line + ': ' : '') + b.message);
      }))));
    }
    var body = el('div', { class: 'okfv-body' });
    if (c.html) body.appendChild(sanitised(c.html));
    else body.appendChild(el('p', { class: 'okfv-muted' }, 'The body is empty.'));
    append(detail, el('section', { 'aria-label': 'Body' }, body));
    if (c.frontmatter) {
      append(detail, card('Frontmatter', el('pre', { class: 'okfv-pre' }, c.frontmatter), false));
    }
    $('okfv-pane-empty').hidden = true;
    detail.hidden = false;
    $('okfv-pane').scrollTop = 0;
  }

  function sanitised(html) {
    var fragment = DOMPurify.sanitize(html, PURIFY);
    fragment.querySelectorAll('a.okf-external').forEach(function (a) {
      a.setAttribute('target', '_blank');
      a.setAttribute('rel', 'noopener noreferrer nofollow');
    });
    return fragment;
  }

  function computationCard(k) {
    var rows = [
      ['runtime', k.runtime || '(none)'],
      ['parameters', k.parameters.length ? el('table', null,
        el('tr', null, el('th', { text: 'name' }), el('th', { text: 'type' }), el('th', { text: 'required' })),
        k.parameters.map(function (p) {
          return el('tr', null, el('td', { text: p.name }), el('td', { text: p.type }),
            el('td', { text: p.required ? 'yes' : 'no' }));
        })) : 'none'],
      ['computation', k.computation ? reading(k.computation) : (k.text ? 'inline, under # Computation' : null)],
      ['executor', reading(k.executor)],
      ['receipt', k.receipt.length ? k.receipt.join(', ') : null],
      ['attester', reading(k.attester)],
      ['freshness', k.freshness.gate + ': ' + k.freshness.detail]
    ];
    var parts = [dl(rows)];
    if (k.problems.length) {
      parts.push(el('ul', null, k.problems.map(function (p) { return el('li', { class: 'okfv-problem' }, p); })));
    }
    if (k.text) {
      parts.push(el('p', { class: 'okfv-muted' }, 'Sanctioned computation: ' + k.text.path + ' lines ' +
        k.text.line_start + '–' + k.text.line_end + (k.text.language ? ' (' + k.text.language + ')' : '') +
        ', sha256 ' + k.text.sha256.slice(0, 16) + '…' + (k.text.cut ? ' (shown cut)' : '')));
      parts.push(el('pre', { class: 'okfv-pre' }, k.text.text));
    } else if (k.unavailable) {
      parts.push(el('p', { class: 'okfv-problem' }, k.unavailable.code + ': ' + k.unavailable.message));
    }
    return card('Attested computation', parts);
  }

  function kindLabel(kind, direction) {
    if (kind.group === 'link') return direction === 'out' ? 'links to' : 'linked from';
    return direction === 'out' ? kind.name : kind.name + ' ←';
  }

  function linksCard(c) {
    function rows(list, direction) {
      var items = list.map(function (j) {
        var e = EDGES[j];
        var other = CONCEPTS[direction === 'out' ? e[1] : e[0]];
        return { kind: KINDS[e[2]], other: other };
      });
      items.sort(function (a, b) {
        return (a.kind.group + a.kind.name).localeCompare(b.kind.group + b.kind.name) ||
          a.other.title.localeCompare(b.other.title);
      });
      if (!items.length) return el('p', { class: 'okfv-muted' }, 'none');
      return el('ul', { class: 'okfv-linklist' }, items.map(function (item) {
        return el('li', null, el('span', { class: 'okfv-kind' }, kindLabel(item.kind, direction)),
          conceptButton(item.other.id));
      }));
    }
    return card('Links out (' + outgoing[c.i].length + ') and in (' + incoming[c.i].length + ')', [
      el('div', null, el('b', null, 'Out'), rows(outgoing[c.i], 'out')),
      el('div', null, el('b', null, 'In'), rows(incoming[c.i], 'in'))
    ]);
  }

  function scrollToAnchor(fragment) {
    var detail = $('okfv-detail');
    var target = detail.querySelector('[id="' + CSS.escape('h-' + fragment) + '"]') ||
      detail.querySelector('[id="' + CSS.escape(fragment) + '"]');
    if (target) target.scrollIntoView({ block: 'start' });
  }

  $('okfv-detail').addEventListener('click', function (event) {
    var a = event.target.closest('a');
    if (!a || !$('okfv-detail').contains(a)) return;
    var href = a.getAttribute('href') || '';
    if (a.dataset.concept !== undefined) {
      event.preventDefault();
      go(a.dataset.concept, a.dataset.anchor);
    } else if (a.dataset.folder !== undefined) {
      event.preventDefault();
      location.hash = folderHash(a.dataset.folder);
    } else if (a.dataset.anchor !== undefined) {
      event.preventDefault();
      scrollToAnchor(a.dataset.anchor);
    } else if (href.charAt(0) === '#') {
      event.preventDefault(); // a footnote: scroll, keep the address on the concept
      scrollToAnchor(href.slice(1));
    }
  });

  // ------------------------------------------------------------------------------------------
  // Search over titles, IDs and tags

  function fold(text) {
    return String(text).normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase();
  }

  var folded = CONCEPTS.map(function (c) {
    return { title: fold(c.title), id: fold(c.id), last: fold(c.id.split('/').pop()),
      tags: c.tags.map(fold) };
  });

  function search(query) {
    var q = fold(query.trim());
    if (!q) return [];
    var words = q.split(/\s+/);
    var hits = [];
    for (var i = 0; i < N; i++) {
      var f = folded[i];
      var score = -1;
      if (f.title === q || f.id === q) score = 0;
      else if (f.title.indexOf(q) === 0) score = 1;
      else if (f.last.indexOf(q) === 0) score = 2;
      else if (f.tags.indexOf(q) >= 0) score = 3;
      else if (f.title.indexOf(q) >= 0) score = 4;
      else if (f.id.indexOf(q) >= 0) score = 5;
      else if (f.tags.some(function (t) { return t.indexOf(q) >= 0; })) score = 6;
      else if (words.length > 1) {
        var all = f.title + ' ' + f.id + ' ' + f.tags.join(' ');
        if (words.every(function (w) { return all.indexOf(w) >= 0; })) score = 7;
      }
      if (score >= 0) hits.push([score, i]);
    }
    hits.sort(function (a, b) {
      return a[0] - b[0] || CONCEPTS[a[1]].title.localeCompare(CONCEPTS[b[1]].title) || a[1] - b[1];
    });
    return hits.slice(0, 50).map(function (h) { return h[1]; });
  }

  var input = $('okfv-search');
  var results = $('okfv-results');
  var active = -1;
  var current = [];

  function showResults() {
    current = search(input.value);
    active = current.length ? 0 : -1;
    results.textContent = '';
    if (!input.value.trim()) { closeResults(); return; }
    if (!current.length) {
      results.appendChild(el('li', { class: 'okfv-none', role: 'option', 'aria-disabled': 'true' },
        'No concept matches'));
    }
    current.forEach(function (i, k) {
      var c = CONCEPTS[i];
      results.appendChild(el('li', { role: 'option', id: 'okfv-r' + k, 'aria-selected': k === active ? 'true' : 'false',
        onmousedown: function (event) { event.preventDefault(); choose(k); } },
        el('span', null, c.title), el('span', { class: 'okfv-rid' }, c.id + (passes(c) ? '' : ' · filtered'))));
    });
    results.hidden = false;
    input.setAttribute('aria-expanded', 'true');
    markActive();
  }

  function markActive() {
    Array.prototype.forEach.call(results.children, function (li, k) {
      li.setAttribute('aria-selected', k === active ? 'true' : 'false');
    });
    if (active >= 0) {
      input.setAttribute('aria-activedescendant', 'okfv-r' + active);
      var li = $('okfv-r' + active);
      if (li) li.scrollIntoView({ block: 'nearest' });
    } else {
      input.removeAttribute('aria-activedescendant');
    }
  }

  function closeResults() {
    results.hidden = true;
    input.setAttribute('aria-expanded', 'false');
    input.removeAttribute('aria-activedescendant');
  }

  function choose(k) {
    if (k < 0 || k >= current.length) return;
    closeResults();
    go(CONCEPTS[current[k]].id);
    if (NARROW.matches) $('okfv-pane').scrollIntoView({ block: 'start' });
  }

  input.addEventListener('input', showResults);
  input.addEventListener('focus', function () { if (input.value.trim()) showResults(); });
  input.addEventListener('blur', closeResults);
  input.addEventListener('keydown', function (event) {
    if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      event.preventDefault();
      if (results.hidden) { showResults(); return; }
      if (!current.length) return;
      active = (active + (event.key === 'ArrowDown' ? 1 : -1) + current.length) % current.length;
      markActive();
    } else if (event.key === 'Enter') {
      event.preventDefault();
      if (results.hidden) showResults();
      choose(active >= 0 ? active : 0);
    } else if (event.key === 'Escape') {
      event.preventDefault();
      if (!results.hidden) closeResults(); else { input.value = ''; input.blur(); }
    }
  });

  // ------------------------------------------------------------------------------------------
  // Filters, colours, legend

  function renderFilters() {
    var body = $('okfv-filter-body');
    body.textContent = '';
    var colourSelect = el('select', { id: 'okfv-colour-by', onchange: function (event) {
      state.colourBy = event.target.value;
      recolour();
    } }, ['type', 'status', 'trust', 'stale', 'orphan', 'folder'].map(function (f) {
      return el('option', { value: f, selected: f === state.colourBy }, FACETS[f].label);
    }));
    append(body, el('div', { class: 'okfv-row' }, el('label', { for: 'okfv-colour-by' }, 'Colour by'), colourSelect));
    FILTERED.forEach(function (facet) {
      append(body, el('fieldset', null, el('legend', null, FACETS[facet].label),
        facetValues[facet].list.map(function (item) {
          var id = 'okfv-f-' + facet + '-' + facetValues[facet].list.indexOf(item);
          return el('label', { for: id },
            el('input', { type: 'checkbox', id: id, checked: !state.hidden[facet].has(item.value),
              onchange: function (event) {
                if (event.target.checked) state.hidden[facet].delete(item.value);
                else state.hidden[facet].add(item.value);
                applyFilters();
              } }),
            el('span', { class: 'okfv-swatch', style: null, 'data-colour': item.colour }),
            valueLabel(facet, item.value), el('span', { class: 'okfv-count' }, item.count.toLocaleString('en')));
        })));
    });
    var orphanCount = CONCEPTS.filter(function (c) { return c.orphan; }).length;
    append(body, el('fieldset', null, el('legend', null, 'Orphans (' + orphanCount + ')'),
      el('select', { id: 'okfv-orphans', 'aria-label': 'Orphans', onchange: function (event) {
        state.orphans = event.target.value;
        applyFilters();
      } }, [['all', 'show all'], ['only', 'only orphans'], ['hide', 'hide orphans']].map(function (o) {
        return el('option', { value: o[0], selected: o[0] === state.orphans }, o[1]);
      }))));
    append(body, el('div', { class: 'okfv-row' }, el('button', { type: 'button', onclick: function () {
      FILTERED.forEach(function (f) { state.hidden[f].clear(); });
      state.orphans = 'all';
      renderFilters();
      applyFilters();
    } }, 'Show all')));
    paintSwatches(body);
  }

  function paintSwatches(root) {
    // Colours go on through the style object (the policy allows no style attribute in markup).
    root.querySelectorAll('[data-colour]').forEach(function (s) {
      s.style.backgroundColor = s.getAttribute('data-colour');
    });
  }

  function renderLegend() {
    var legend = $('okfv-legend');
    legend.textContent = '';
    var facet = state.colourBy;
    var filterable = FILTERED.indexOf(facet) >= 0;
    var list = facetValues[facet].list;
    var shownValues = list.slice(0, PALETTE.length);
    append(legend, el('h2', null, 'Colour: ' + FACETS[facet].label.toLowerCase()));
    append(legend, el('ul', null, shownValues.map(function (item) {
      var off = filterable && state.hidden[facet].has(item.value);
      return el('li', { title: filterable ? 'click to hide or show' : null },
        el('span', { class: 'okfv-swatch', 'data-colour': item.colour }),
        el(filterable ? 'button' : 'span', filterable ? { type: 'button', class: 'okfv-go',
          'aria-pressed': off ? 'false' : 'true', onclick: function () {
            if (off) state.hidden[facet].delete(item.value); else state.hidden[facet].add(item.value);
            renderFilters();
            applyFilters();
          } } : null, off ? el('s', null, valueLabel(facet, item.value)) : valueLabel(facet, item.value)),
        el('span', { class: 'okfv-muted' }, item.count.toLocaleString('en')));
    }), list.length > shownValues.length ?
      el('li', null, el('span', { class: 'okfv-swatch', 'data-colour': OTHER }),
        (list.length - shownValues.length) + ' more') : null));
    append(legend, el('ul', null,
      el('li', null, el('span', { class: 'okfv-swatch okfv-orphan' }), 'orphan'),
      el('li', null, el('span', { class: 'okfv-line' }), 'link'),
      el('li', null, el('span', { class: 'okfv-line okfv-relation' }), 'relation'),
      el('li', null, el('span', { class: 'okfv-line okfv-field' }), 'field edge'),
      el('li', null, 'size: links in')));
    paintSwatches(legend);
  }

  // ------------------------------------------------------------------------------------------
  // About: the bundle, the keys, the licences

  var KEYS = [['/', 'search'], ['↑ ↓ Enter', 'move in the results, select'], ['Esc', 'close the results, clear the selection'],
    ['j / k', 'next / previous concept (ID order, filters applied)'], ['[ / ]', 'back / forward'],
    ['+ / -', 'zoom'], ['0 or f', 'fit the graph'], ['l', 'force layout / folder layout'],
    ['?', 'this dialog'], ['Tab', 'move through the controls and the detail pane']];

  function renderAbout() {
    var body = $('okfv-about-body');
    body.textContent = '';
    append(body, [
      el('h2', { id: 'okfv-about-title' }, 'About this page'),
      el('p', null, 'Made by ' + META.generator + ' from the bundle ' + (META.bundle || '(unnamed)') +
        ' (OKF ' + META.okf_version + ', revision ' + META.revision.slice(0, 12) + '). ' +
        'Staleness is judged as of ' + META.as_of + ', the date the page was made for.'),
      el('p', null, plural(N, 'concept') + ', ' + plural(META.edges, 'edge') +
        (state.budgetMode ? '; above the node budget of ' + META.node_budget.toLocaleString('en') +
          ', the graph starts from the folders and opens them on click.' : '.')),
      el('p', { class: 'okfv-muted' }, 'The page is one file and requests nothing: its scripts and ' +
        'styles are inside it, and its Content-Security-Policy refuses every fetch. Markdown is ' +
        'rendered without raw HTML and sanitised again here; no script from the bundle runs.'),
      META.unparseable.length ? [el('h3', null, 'Files that could not be read'),
        el('ul', null, META.unparseable.map(function (u) { return el('li', null, u.path + ': ' + u.message); }))] : null,
      META.skipped.length ? [el('h3', null, 'Entries skipped while loading'),
        el('ul', null, META.skipped.map(function (s) { return el('li', null, (s.file || '') + ': ' + s.message); }))] : null,
      el('h3', null, 'Keyboard'),
      el('table', null, KEYS.map(function (k) {
        return el('tr', null, el('td', null, el('kbd', null, k[0])), el('td', null, k[1]));
      })),
      el('h3', { id: 'okfv-licences' }, 'Licences'),
      el('p', null, 'bundle-mcp is licensed under Apache-2.0. The page includes these libraries, ' +
        'vendored from the npm registry, under their own licences:'),
      el('ul', null, DATA.licences.map(function (lib) {
        return el('li', null, el('b', null, lib.name + ' ' + lib.version), ' — ' + lib.licence + ' — ' +
          lib.purpose + (lib.homepage ? ' — ' + lib.homepage : ''),
          lib.texts.map(function (t) {
            return el('details', null, el('summary', null, t.file), el('pre', { class: 'okfv-pre' }, t.text));
          }));
      }))
    ]);
  }

  var about = $('okfv-about');
  $('okfv-about-open').addEventListener('click', function () { about.showModal(); });
  $('okfv-about-close').addEventListener('click', function () { about.close(); });

  // ------------------------------------------------------------------------------------------
  // Wiring

  cy.on('tap', 'node.concept', function (event) { go(CONCEPTS[event.target.data('ci')].id); });
  cy.on('tap', 'node.folder.collapsed', function (event) { expandFolder(event.target.data('path')); });
  cy.on('dbltap', 'node.folder.expanded', function (event) {
    if (state.budgetMode) collapseFolder(event.target.data('path'));
  });
  cy.on('mouseover', 'node', function (event) {
    var n = event.target;
    $('okfv-graph').title = n.hasClass('concept') ? CONCEPTS[n.data('ci')].title + '\n' +
      CONCEPTS[n.data('ci')].id : n.data('path') + (n.hasClass('collapsed') ? ' (click to open)' : '');
  });
  cy.on('mouseout', 'node', function () { $('okfv-graph').title = ''; });

  $('okfv-zoom-in').addEventListener('click', function () { zoomBy(1.3); });
  $('okfv-zoom-out').addEventListener('click', function () { zoomBy(1 / 1.3); });
  $('okfv-fit').addEventListener('click', function () { fit(); });
  $('okfv-layout').addEventListener('click', toggleLayout);
  $('okfv-reset').addEventListener('click', resetBudgetView);
  window.addEventListener('hashchange', route);

  document.addEventListener('keydown', function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || about.open) return;
    var t = event.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA')) return;
    var handled = true;
    switch (event.key) {
      case '/': input.focus(); input.select(); break;
      case 'Escape': deselect(); break;
      case '+': case '=': zoomBy(1.3); break;
      case '-': zoomBy(1 / 1.3); break;
      case '0': case 'f': fit(); break;
      case 'l': if (!HEAVY) toggleLayout(); break;
      case 'j': step(1); break;
      case 'k': step(-1); break;
      case '[': history.back(); break;
      case ']': history.forward(); break;
      case '?': about.showModal(); break;
      default: handled = false;
    }
    if (handled) event.preventDefault();
  });

  $('okfv-title').textContent = META.bundle || 'OKF bundle';
  renderFilters();
  renderAbout();
  // The force layout needs the edges as Cytoscape elements: offered for the small graphs only.
  $('okfv-layout').hidden = HEAVY;
  if (state.budgetMode) {
    $('okfv-reset').hidden = false;
    resetBudgetView();
  } else {
    timings.built = performance.now();
    syncGraph();
    timings.synced = performance.now();
    fit();
  }
  if (location.hash) route();
  timings.ready = performance.now();

  // What a test (or a curious reader) can ask the page; nothing here changes it.
  window.okfViewer = Object.freeze({
    ready: true,
    cy: cy,
    conceptCount: N,
    nodeCount: function () { return cy.nodes('.concept').length; },
    visibleCount: function () { return cy.nodes('.concept').filter(function (n) { return !n.hasClass('hidden'); }).length; },
    selected: function () { return state.selected >= 0 ? CONCEPTS[state.selected].id : null; },
    budgetMode: state.budgetMode,
    timings: Object.freeze(timings)
  });
  document.body.setAttribute('data-ready', 'true');
})();
