// prchat dashboard: asking, streaming a turn over the SSE contract with a
// fetch reader (so the session cookie and CSRF token go along, and a
// dropped stream resumes with Last-Event-ID), tool steps, cancel, and the
// citation viewer. Text from the model or the repository is only ever set
// as textContent; the one HTML swapped in is the server's sanitised render.
"use strict";

(function () {
  const page = document.getElementById("page");
  if (!page) return;
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const filesAPI = page.dataset.files;
  const conversation = page.dataset.conversation;

  function headers(extra) {
    const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
    if (csrf) h["X-CSRF-Token"] = csrf;
    return h;
  }

  async function apiError(res) {
    try {
      const body = await res.json();
      if (body && body.error) return body.error.message + (body.error.trace_id ? " (trace " + body.error.trace_id + ")" : "");
    } catch (e) { /* not JSON */ }
    return "The server answered " + res.status + ".";
  }

  // ---- SSE over fetch -------------------------------------------------

  // settledTurn returns turn n if it is settled, else null.
  async function settledTurn(n) {
    try {
      const res = await fetch("/api/v1/conversations/" + encodeURIComponent(conversation) + "/turns/" + n, { credentials: "same-origin" });
      if (!res.ok) return null;
      const t = await res.json();
      return ["succeeded", "failed", "cancelled", "interrupted"].includes(t.state) ? t : null;
    } catch (e) {
      return null;
    }
  }

  // follow streams a turn's events to onEvent until done or error,
  // reconnecting with Last-Event-ID after a dropped connection. A stream
  // that ends with neither (nor the server's reconnect hint), or a 204
  // (the client had the final event), is a settled turn's when the turn
  // reads settled: the server sends nothing twice, so the turn ends here.
  async function follow(n, onEvent) {
    const url = "/api/v1/conversations/" + encodeURIComponent(conversation) + "/turns/" + n + "/events";
    let lastId = "";
    let retry = 3000;
    for (let attempt = 0; attempt < 50; attempt++) {
      let ended = false;
      let hinted = false;
      let closed = false;
      try {
        const h = { Accept: "text/event-stream" };
        if (lastId) h["Last-Event-ID"] = lastId;
        const res = await fetch(url, { headers: h, credentials: "same-origin" });
        if (!res.ok) {
          onEvent({ type: "error", message: await apiError(res) });
          return;
        }
        // 204: this client has the final event; there is nothing to read.
        if (res.status === 204) closed = true;
        const reader = res.status === 204 ? null : res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        while (reader) {
          const { value, done } = await reader.read();
          if (done) { closed = true; break; }
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let id = "", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("id:")) id = line.slice(3).trim();
              else if (line.startsWith("data:")) data += line.slice(5).trim();
              else if (line.startsWith("retry:")) retry = parseInt(line.slice(6), 10) || retry;
              else if (line.startsWith(": reconnect")) hinted = true;
            }
            if (!data) continue;
            if (id) lastId = id;
            const ev = JSON.parse(data);
            onEvent(ev);
            if (ev.type === "done" || ev.type === "error") {
              ended = true;
              reader.cancel().catch(function () {});
              return;
            }
          }
        }
      } catch (e) {
        // dropped: reconnect below
      }
      if (ended) return;
      if (closed && !hinted) {
        const t = await settledTurn(n);
        if (t) {
          onEvent(t.state === "succeeded"
            ? { type: "done", conversation_id: conversation, turn: t.number, answer: t.answer }
            : { type: "error", message: t.note || t.reason, reason: t.reason });
          return;
        }
      }
      await new Promise(function (r) { setTimeout(r, Math.min(retry, 3000)); });
    }
    onEvent({ type: "error", message: "Lost the connection to the server." });
  }

  // ---- a turn on the page ---------------------------------------------

  function turnElement(n) { return document.getElementById("turn-" + n); }

  function watch(article) {
    const n = article.dataset.turn;
    const stream = article.querySelector(".stream");
    const steps = article.querySelector(".steps");
    const state = article.querySelector(".state");
    const tools = {};
    const cancel = article.querySelector(".cancel");
    if (cancel) {
      cancel.addEventListener("click", async function () {
        cancel.disabled = true;
        const res = await fetch("/api/v1/conversations/" + encodeURIComponent(conversation) + "/turns/" + n + "/cancel",
          { method: "POST", headers: headers(), credentials: "same-origin", body: "{}" });
        if (!res.ok) { cancel.disabled = false; showAskError(await apiError(res)); }
      });
    }
    follow(n, function (ev) {
      switch (ev.type) {
        case "state":
          if (state) { state.textContent = ev.state; state.className = "state state-" + ev.state; }
          article.dataset.state = ev.state;
          break;
        case "text_delta":
          if (stream) stream.textContent += ev.text;
          break;
        case "tool_start": {
          const li = document.createElement("li");
          const d = document.createElement("details");
          d.open = true;
          d.className = "step running";
          const s = document.createElement("summary");
          s.textContent = ev.tool_name;
          const pre = document.createElement("pre");
          pre.className = "input";
          pre.textContent = ev.input == null ? "" : JSON.stringify(ev.input);
          d.append(s, pre);
          li.append(d);
          steps.append(li);
          tools[ev.tool_id] = d;
          break;
        }
        case "tool_result": {
          const d = tools[ev.tool_id];
          if (d) {
            const p = document.createElement("p");
            p.className = "summary";
            p.textContent = ev.summary;
            d.append(p);
            d.open = false;
            d.className = "step done";
          }
          break;
        }
        case "note": {
          const p = document.createElement("p");
          p.className = "note live-note";
          p.textContent = ev.text;
          article.append(p);
          break;
        }
        case "done":
        case "error":
          settle(article, ev);
          break;
      }
    });
  }

  // settle swaps in the server's render of the settled turn, keeping the
  // tool steps seen live (collapsed).
  async function settle(article, ev) {
    const n = article.dataset.turn;
    const res = await fetch("/ui/conversations/" + encodeURIComponent(conversation) + "/turns/" + n, { credentials: "same-origin" });
    if (!res.ok) {
      if (ev.type === "error") {
        const p = document.createElement("p");
        p.className = "reason";
        p.textContent = ev.message;
        article.append(p);
      }
      return;
    }
    const html = await res.text();
    const tpl = document.createElement("template");
    tpl.innerHTML = html.trim();
    const fresh = tpl.content.firstElementChild;
    if (!fresh) return;
    const oldSteps = article.querySelector(".steps");
    const newSteps = fresh.querySelector(".steps");
    if (oldSteps && newSteps) {
      for (const d of oldSteps.querySelectorAll("details")) { d.open = false; d.className = "step done"; }
      newSteps.replaceWith(oldSteps);
    }
    article.replaceWith(fresh);
    bindCitations(fresh);
    if (ev.type === "error" && !fresh.querySelector(".reason")) {
      const p = document.createElement("p");
      p.className = "reason";
      p.textContent = ev.message;
      fresh.append(p);
    }
    const send = document.getElementById("send");
    if (send) send.disabled = false;
  }

  // ---- asking -----------------------------------------------------------

  let focus = null;

  function showAskError(msg) {
    const el = document.getElementById("ask-error");
    if (el) el.textContent = msg || "";
  }

  function setFocus(f) {
    focus = f;
    const box = document.getElementById("focus");
    if (!box) return;
    if (!f) { box.hidden = true; return; }
    const a = f.anchors[0];
    box.querySelector("span").textContent = "About " + a.path + ":" + a.start_line + "-" + a.end_line;
    box.hidden = false;
  }

  const form = document.getElementById("ask");
  if (form) {
    const q = document.getElementById("question");
    q.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
    });
    const clear = document.getElementById("clear-focus");
    if (clear) clear.addEventListener("click", function () { setFocus(null); q.focus(); });
    form.addEventListener("submit", async function (e) {
      e.preventDefault();
      showAskError("");
      const question = q.value.trim();
      if (!question) { showAskError("Write a question first."); return; }
      const send = document.getElementById("send");
      send.disabled = true;
      const body = { question: question };
      if (focus) body.focus = focus;
      let res;
      try {
        res = await fetch(page.dataset.ask, { method: "POST", headers: headers(), credentials: "same-origin", body: JSON.stringify(body) });
      } catch (err) {
        send.disabled = false;
        showAskError("Could not reach the server.");
        return;
      }
      if (res.status !== 202) { send.disabled = false; showAskError(await apiError(res)); return; }
      const out = await res.json();
      q.value = "";
      setFocus(null);
      if (!conversation) {
        window.location.assign("/ui/conversations/" + encodeURIComponent(out.conversation.id));
        return;
      }
      const frag = await fetch("/ui/conversations/" + encodeURIComponent(conversation) + "/turns/" + out.turn.number, { credentials: "same-origin" });
      const tpl = document.createElement("template");
      tpl.innerHTML = (await frag.text()).trim();
      const article = tpl.content.firstElementChild;
      document.getElementById("turns").append(article);
      if (article.dataset.pending) watch(article); else send.disabled = false;
    });
  }

  // ---- citations and the file viewer -----------------------------------

  const viewer = document.getElementById("viewer");
  let shown = null; // {path, lines: [first, last]}
  let selStart = 0, selEnd = 0;

  function markSelection() {
    for (const tr of viewer.querySelectorAll("tr")) {
      const n = parseInt(tr.dataset.line, 10);
      tr.classList.toggle("selected", selStart > 0 && n >= selStart && n <= selEnd);
    }
    const btn = document.getElementById("ask-lines");
    if (btn) btn.disabled = selStart === 0;
  }

  async function openLines(path, start, end) {
    if (!viewer) return;
    const from = Math.max(1, (start || 1) - 5);
    const to = end ? end + 5 : from + 200;
    const url = filesAPI + "?path=" + encodeURIComponent(path) + "&start=" + from + "&end=" + to;
    const res = await fetch(url, { credentials: "same-origin" });
    const tbody = viewer.querySelector("tbody");
    tbody.textContent = "";
    viewer.querySelector(".vpath").textContent = path + (start ? ":" + start + "-" + end : "");
    viewer.hidden = false;
    if (!res.ok) {
      const tr = document.createElement("tr");
      const td = document.createElement("td");
      td.className = "error";
      td.textContent = await apiError(res);
      tr.append(td);
      tbody.append(tr);
      return;
    }
    const fl = await res.json();
    shown = { path: fl.path };
    selStart = 0; selEnd = 0;
    fl.lines.forEach(function (text, i) {
      const n = fl.start_line + i;
      const tr = document.createElement("tr");
      tr.dataset.line = n;
      if (start && n >= start && n <= end) tr.classList.add("cited");
      const num = document.createElement("td");
      num.className = "num";
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = n;
      b.setAttribute("aria-label", "select line " + n);
      b.addEventListener("click", function (e) {
        if (e.shiftKey && selStart) {
          selStart = Math.min(selStart, n); selEnd = Math.max(selEnd, n);
        } else { selStart = n; selEnd = n; }
        markSelection();
      });
      num.append(b);
      const code = document.createElement("td");
      code.className = "code";
      code.textContent = text;
      tr.append(num, code);
      tbody.append(tr);
    });
    markSelection();
  }

  function bindCitations(root) {
    for (const a of root.querySelectorAll("a.cite")) {
      a.addEventListener("click", function (e) {
        e.preventDefault();
        openLines(a.dataset.path, parseInt(a.dataset.start, 10) || 0, parseInt(a.dataset.end, 10) || 0);
      });
    }
  }

  if (viewer) {
    document.getElementById("viewer-close").addEventListener("click", function () { viewer.hidden = true; });
    const askLines = document.getElementById("ask-lines");
    if (askLines) {
      askLines.addEventListener("click", function () {
        if (!shown || !selStart) return;
        setFocus({ kind: "overview", anchors: [{ path: shown.path, start_line: selStart, end_line: selEnd }] });
        const q = document.getElementById("question");
        if (q) q.focus();
      });
    }
  }

  bindCitations(document);
  for (const article of document.querySelectorAll("article.turn[data-pending]")) watch(article);
})();
