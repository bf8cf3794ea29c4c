// Run by Chromium in the page test_screenshots.py builds: where each wanted text is drawn
// (its boxes, whether it is on top where it is drawn, its colour and opacity, each
// character's left and right edges), written as JSON into a pre element ("layout") for --dump-dom.
(() => {
  const wanted = JSON.parse(document.getElementById("layout-wanted").textContent);
  const nodes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let text = "";
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest("script,style,#layout-wanted")) continue;
    nodes.push([n, text.length]);
    text += n.data;
  }
  const at = (i) => {
    let k = nodes.length - 1;
    while (nodes[k][1] > i) k--;
    return [nodes[k][0], i - nodes[k][1]];
  };
  const rgba = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const seen = {};
  for (const w of wanted) {
    const start = text.indexOf(w);
    if (start < 0) { seen[w] = null; continue; }
    const range = document.createRange();
    range.setStart(...at(start));
    const [endNode, endOffset] = at(start + w.length - 1);
    range.setEnd(endNode, endOffset + 1);
    const rects = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => {
      const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
      return {left: r.left, right: r.right, top: r.top, bottom: r.bottom,
              on_top: !!hit && (hit.contains(endNode) || hit.contains(range.startContainer) ||
                                range.intersectsNode(hit))};
    });
    const el = range.startContainer.parentElement;
    let opacity = 1;
    for (let e = el; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
    const style = getComputedStyle(el);
    const chars = [];
    for (let i = start; i < start + w.length; i++) {
      const r = document.createRange();
      const [a, ao] = at(i);
      r.setStart(a, ao); r.setEnd(a, ao + 1);
      const box = r.getBoundingClientRect();
      chars.push([text[i], box.left, box.right]);
    }
    seen[w] = {rects, chars, opacity, color: rgba(style.color), visibility: style.visibility,
               font_px: parseFloat(style.fontSize)};
  }
  const out = document.createElement("pre");
  out.id = "layout";
  out.textContent = JSON.stringify({
    width: window.innerWidth,
    scroll_width: document.documentElement.scrollWidth,
    background: rgba(getComputedStyle(document.body).backgroundColor),
    seen,
  });
  document.body.appendChild(out);
})();
