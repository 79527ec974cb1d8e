"""``/docs``: a self-contained page over ``/openapi.json`` (no CDN assets, so it works offline): every
operation with its parameters and request body, an API key field (the Authorize step) and a form
that sends the request from the browser."""

CSP = "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>xmemory_gpu API</title>
<style>
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
summary{cursor:pointer;font-family:monospace;padding:.3rem 0}
.m{display:inline-block;width:4.5rem;font-weight:bold}
textarea,input[type=text]{width:100%;font-family:monospace;box-sizing:border-box}
pre{background:#f4f4f4;padding:.5rem;white-space:pre-wrap;overflow-wrap:anywhere}
</style></head><body>
<h1>xmemory_gpu API</h1>
<p>The schema: <a href="openapi.json">openapi.json</a>. Routes marked &#128274; need
<code>Authorization: Bearer KEY</code> when the server has keys.</p>
<p><label>API key <input id="key" type="password" autocomplete="off"></label>
<button id="authorize">Authorize</button> <span id="authorized"></span></p>
<div id="ops">loading openapi.json ...</div>
<script>
"use strict";
let key = "";
document.getElementById("authorize").onclick = () => {
  key = document.getElementById("key").value.trim();
  document.getElementById("authorized").textContent = key ? "key set for this page" : "no key";
};
function el(tag, text) { const e = document.createElement(tag); if (text) e.textContent = text; return e; }
function operation(path, method, op) {
  const box = el("details"), sum = el("summary"), m = el("span", method.toUpperCase());
  m.className = "m";
  sum.append(m, path + (op.security ? " \\u{1F512}" : "") + " \\u2014 " + (op.summary || ""));
  box.append(sum);
  if (op.description) box.append(el("p", op.description));
  const params = op.parameters || [], inputs = {};
  for (const p of params) {
    const label = el("label", p.name + " (" + p.in + (p.required ? ", required" : "") + ") ");
    inputs[p.name] = el("input"); inputs[p.name].type = "text";
    label.append(inputs[p.name]); box.append(label);
  }
  let body = null;
  if (op.requestBody) {
    body = el("textarea"); body.rows = 6; body.placeholder = "JSON request body";
    box.append(el("div", "request body (JSON):"), body);
  }
  const send = el("button", "Send"), out = el("pre");
  send.onclick = async () => {
    let url = path; const q = new URLSearchParams();
    for (const p of params) {
      const v = inputs[p.name].value;
      if (p.in === "path") url = url.replace("{" + p.name + "}", encodeURIComponent(v));
      else if (v !== "") q.append(p.name, v);
    }
    const headers = {};
    if (key) headers["Authorization"] = "Bearer " + key;
    if (body) headers["Content-Type"] = "application/json";
    try {
      const r = await fetch(url.slice(1) + (q.toString() ? "?" + q : ""),
                            {method: method.toUpperCase(), headers, body: body ? body.value : undefined});
      out.textContent = r.status + " " + r.statusText + "\\n" + await r.text();
    } catch (e) { out.textContent = String(e); }
  };
  box.append(el("p"), send, out);
  return box;
}
fetch("openapi.json").then(r => r.json()).then(spec => {
  const ops = document.getElementById("ops");
  ops.textContent = "";
  for (const [path, item] of Object.entries(spec.paths))
    for (const [method, op] of Object.entries(item)) ops.append(operation(path, method, op));
}).catch(e => { document.getElementById("ops").textContent = "cannot load openapi.json: " + e; });
</script></body></html>
"""
