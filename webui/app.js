// deskside's chat page (docs/WEBUI.md). It talks to the server that served it through the same
// OpenAI-style API every client uses: /v1/models and /v1/deskside/info for what is loaded,
// /v1/chat/completions streamed as server-sent events for answers. Conversations and settings
// live in localStorage, the API key (when the server has one) in sessionStorage.
//
// Safety: everything a model or a user wrote is HTML-escaped before any formatting is applied,
// so the only tags in rendered messages are the renderer's own; the server's
// Content-Security-Policy forbids inline script besides, so markup that slipped through could
// still not run.
'use strict';

const kConversations = 'deskside.conversations';
const kCurrent = 'deskside.current';
const kSettings = 'deskside.settings';
const kApiKey = 'deskside.apiKey';
const kTitleLength = 40;

const $ = (id) => document.getElementById(id);

const state = {
  conversations: [],  // [{id, title, messages: [{role, content, reasoning?, tool_calls?, stats?, error?, stopped?}]}]
  current: null,      // id of the conversation shown
  settings: null,
  info: {model: null, context: null, devices: null},
  controller: null,   // the AbortController of the request running, if any
};

// ---- storage -------------------------------------------------------------------------------

function defaultSettings() {
  return {system: '', temperature: '', top_p: '', max_tokens: '', seed: '', extra: ''};
}

function readJson(storage, key, fallback) {
  try {
    const v = JSON.parse(storage.getItem(key));
    return v === null ? fallback : v;
  } catch (e) {
    return fallback;
  }
}

function loadState() {
  const list = readJson(localStorage, kConversations, []);
  state.conversations = Array.isArray(list)
    ? list.filter((c) => c && typeof c.id === 'string' && Array.isArray(c.messages)) : [];
  state.current = localStorage.getItem(kCurrent);
  const s = readJson(localStorage, kSettings, {});
  state.settings = Object.assign(defaultSettings(), typeof s === 'object' && s ? s : {});
}

function save() {
  try {
    localStorage.setItem(kConversations, JSON.stringify(state.conversations));
    localStorage.setItem(kCurrent, state.current || '');
    localStorage.setItem(kSettings, JSON.stringify(state.settings));
  } catch (e) {  // the quota: say so rather than lose the answer silently
    setNotice('Could not save the conversation: ' + e.message);
  }
}

function conversation() {
  return state.conversations.find((c) => c.id === state.current) || null;
}

function newConversation() {
  const c = {id: Date.now().toString(36) + Math.random().toString(36).slice(2, 8), title: 'New chat', messages: []};
  state.conversations.unshift(c);
  state.current = c.id;
  return c;
}

// ---- Markdown, escaped first ---------------------------------------------------------------

function escapeHtml(s) {
  const map = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'};
  return String(s).replace(/[&<>"']/g, (c) => map[c]);
}

// Inline formatting of escaped text: code spans keep their text as it is; bold, then italic.
function inline(escaped) {
  return escaped.split(/(`[^`\n]+`)/).map((part, i) => {
    if (i % 2 === 1) return '<code>' + part.slice(1, -1) + '</code>';
    return part
      .replace(/\*\*(?=\S)([^*]*?\S)\*\*/g, '<strong>$1</strong>')
      .replace(/(^|[^\w])__(?=\S)([^_]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
      .replace(/(^|[^*\w])\*(?=\S)([^*]*?\S)\*(?![*\w])/g, '$1<em>$2</em>')
      .replace(/(^|[^_\w])_(?=\S)([^_]*?\S)_(?![_\w])/g, '$1<em>$2</em>');
  }).join('');
}

function codeBlock(escapedCode, lang) {
  return '<div class="code"><div class="code-head"><span>' + (lang || 'code') +
    '</span><button type="button" class="copy">Copy</button></div><pre><code>' + escapedCode +
    '</code></pre></div>';
}

// A CommonMark subset: fenced code, headings, bullet and numbered lists, paragraphs (single line
// breaks kept), inline code, bold and italic. An unclosed fence (an answer still streaming) runs
// to the end. The input is escaped before it is split, so every tag here is the renderer's.
function renderMarkdown(text) {
  const lines = escapeHtml(text).split('\n');
  const out = [];
  let para = [];
  let list = null;  // {tag, items}
  const flushPara = () => {
    if (para.length) out.push('<p>' + para.map(inline).join('<br>') + '</p>');
    para = [];
  };
  const flushList = () => {
    if (list) {
      const items = list.items.map((x) => '<li>' + inline(x) + '</li>').join('');
      out.push('<' + list.tag + '>' + items + '</' + list.tag + '>');
    }
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*```\s*([\w+#.-]*)\s*$/.exec(line);
    if (fence) {
      flushPara();
      flushList();
      const code = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
      out.push(codeBlock(code.join('\n'), fence[1]));
      continue;
    }
    if (/^\s*$/.test(line)) {
      flushPara();
      flushList();
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d{1,9}[.)]\s+(.*)$/.exec(line);
    if (heading) {
      flushPara();
      flushList();
      const level = Math.min(heading[1].length + 2, 6);
      out.push('<h' + level + '>' + inline(heading[2]) + '</h' + level + '>');
    } else if (bullet || numbered) {
      flushPara();
      const tag = bullet ? 'ul' : 'ol';
      if (list && list.tag !== tag) flushList();
      if (!list) list = {tag, items: []};
      list.items.push((bullet || numbered)[1]);
    } else if (list && /^\s+\S/.test(line)) {
      list.items[list.items.length - 1] += ' ' + line.trim();
    } else {
      flushList();
      para.push(line);
    }
  }
  flushPara();
  flushList();
  return out.join('');
}

// ---- API -----------------------------------------------------------------------------------

let keyPrompt = null;  // one dialog for every request that got a 401 at once

function askKey(reason) {
  if (keyPrompt) return keyPrompt;
  keyPrompt = new Promise((resolve) => {
    const dialog = $('key-dialog');
    $('key-reason').textContent = reason;
    $('api-key').value = '';
    const done = (value) => {
      $('key-ok').onclick = $('key-cancel').onclick = $('api-key').onkeydown = dialog.oncancel = null;
      dialog.close();
      keyPrompt = null;
      resolve(value);
    };
    $('key-ok').onclick = () => done($('api-key').value.trim() || null);
    $('key-cancel').onclick = () => done(null);
    dialog.oncancel = () => done(null);
    $('api-key').onkeydown = (e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        done($('api-key').value.trim() || null);
      }
    };
    dialog.showModal();
    $('api-key').focus();
  });
  return keyPrompt;
}

// fetch() with the key; on a 401 asks for the key once and tries again with it.
async function api(path, options = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = {};
    if (options.body) headers['Content-Type'] = 'application/json';
    const key = sessionStorage.getItem(kApiKey);
    if (key) headers['Authorization'] = 'Bearer ' + key;
    const res = await fetch(path, Object.assign({}, options, {headers}));
    if (res.status !== 401 || attempt > 0) return res;
    const given = await askKey(key ? 'The server did not accept the key; enter its API key.'
                                   : 'This server was started with --api-key; enter the key to use it.');
    if (!given) return res;
    sessionStorage.setItem(kApiKey, given);
  }
}

const kStatusHelp = {
  400: 'The server refused the request',
  401: 'The API key was not accepted',
  404: 'Not found',
  413: 'The conversation is larger than the server accepts (--max-body)',
  429: 'Too many connections from this address',
  500: 'The server failed',
  503: 'The server is busy or still loading; try again',
};

// A readable message for an error response: what the status means, then the server's words.
async function errorText(res) {
  let detail = '';
  try {
    const body = await res.json();
    detail = (body.error && (body.error.message || body.error.type)) || '';
  } catch (e) {
    detail = '';
  }
  const what = kStatusHelp[res.status] || 'HTTP ' + res.status;
  return what + ' (' + res.status + ')' + (detail ? ': ' + detail : '');
}

// Reads an SSE body, calling onData with each event's parsed JSON until "[DONE]".
// ref: https://html.spec.whatwg.org/multipage/server-sent-events.html (event stream format)
async function readEvents(res, onData) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, {stream: true});
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (!data) continue;
      if (data === '[DONE]') return;
      onData(JSON.parse(data));
    }
  }
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// What is loaded: waits while the server loads its model (503), asks for a key on a 401.
async function loadInfo() {
  $('model-name').textContent = 'connecting…';
  for (;;) {
    let res;
    try {
      res = await api('/v1/models');
    } catch (e) {
      $('model-name').textContent = 'server not reachable, retrying…';
      await sleep(2000);
      continue;
    }
    if (res.status === 503) {
      $('model-name').textContent = 'the server is loading its model…';
      await sleep(1000);
      continue;
    }
    if (!res.ok) {
      $('model-name').textContent = await errorText(res);
      return;
    }
    const m = (await res.json()).data[0];
    state.info.model = m.id;
    state.info.context = m.context_length || null;
    break;
  }
  try {
    const res = await api('/v1/deskside/info');
    if (res.ok) {
      const info = await res.json();
      state.info.devices = info.devices || null;
      state.info.context = info.context_length || state.info.context;
    }
  } catch (e) {
    // an older server without the route: the name and context are enough
  }
  $('model-name').textContent = state.info.model;
  $('model-ctx').textContent = state.info.context ? 'context ' + state.info.context : '';
  $('model-devices').textContent = state.info.devices ? 'on ' + state.info.devices : '';
}

// ---- requests ------------------------------------------------------------------------------

function numberSetting(name, integer) {
  const raw = String(state.settings[name] || '').trim();
  if (!raw) return undefined;
  const v = Number(raw);
  if (!Number.isFinite(v) || (integer && !Number.isInteger(v))) throw new Error(name + ' is not a number: ' + raw);
  return v;
}

function requestBody(messages) {
  const s = state.settings;
  const body = {model: state.info.model || 'default', messages: [], stream: true,
                stream_options: {include_usage: true}};
  if (s.system.trim()) body.messages.push({role: 'system', content: s.system});
  for (const m of messages) {
    if (m.role === 'assistant' && !m.content) continue;  // an error or a stop before any text
    body.messages.push({role: m.role, content: m.content});
  }
  for (const [name, integer] of [['temperature', false], ['top_p', false], ['max_tokens', true], ['seed', true]]) {
    const v = numberSetting(name, integer);
    if (v !== undefined) body[name] = v;
  }
  if (s.extra.trim()) Object.assign(body, JSON.parse(s.extra));
  return body;
}

// Streams an answer to the conversation's messages into a new assistant message.
async function generate(conv) {
  const msg = {role: 'assistant', content: '', reasoning: '', tool_calls: []};
  let body;
  try {
    body = requestBody(conv.messages);
  } catch (e) {
    msg.error = 'Settings: ' + e.message;
  }
  conv.messages.push(msg);
  renderMessages();
  if (msg.error) return save();
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  const t0 = performance.now();
  let tFirst = null;
  let usage = null;
  let timings = null;
  let pending = false;
  const update = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      updateMessage(conv.messages.indexOf(msg), msg);
    });
  };
  try {
    const res = await api('/v1/chat/completions', {method: 'POST', body: JSON.stringify(body),
                                                   signal: controller.signal});
    if (!res.ok) {
      msg.error = await errorText(res);
    } else {
      await readEvents(res, (chunk) => {
        if (chunk.error) {
          msg.error = 'The server failed: ' + (chunk.error.message || 'unknown error');
          return;
        }
        const choice = chunk.choices && chunk.choices[0];
        const d = (choice && choice.delta) || {};
        if (tFirst === null && (d.content || d.reasoning_content || d.tool_calls)) tFirst = performance.now();
        if (d.content) msg.content += d.content;
        if (d.reasoning_content) msg.reasoning += d.reasoning_content;
        for (const call of d.tool_calls || []) {
          const t = msg.tool_calls[call.index || 0] || (msg.tool_calls[call.index || 0] = {name: '', arguments: ''});
          if (call.function && call.function.name) t.name += call.function.name;
          if (call.function && call.function.arguments) t.arguments += call.function.arguments;
        }
        if (choice && choice.finish_reason) msg.finish_reason = choice.finish_reason;
        if (chunk.usage) usage = chunk.usage;
        if (chunk.timings) timings = chunk.timings;  // llama.cpp-style servers measure these themselves
        update();
      });
    }
  } catch (e) {
    if (e.name === 'AbortError') msg.stopped = true;
    else msg.error = 'The request failed: ' + e.message;
  }
  const tEnd = performance.now();
  if (usage) msg.stats = stats(usage, timings, t0, tFirst, tEnd);
  state.controller = null;
  setBusy(false);
  save();
  renderMessages();
}

// Prompt and generation speed: the server's own timings when it sends them, else measured here
// (prompt: request to first token, which includes the network and any queueing; generation:
// first token to last).
function stats(usage, timings, t0, tFirst, tEnd) {
  const s = {prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens,
             context: state.info.context};
  if (timings && timings.prompt_per_second) s.prompt_tps = timings.prompt_per_second;
  else if (tFirst !== null && tFirst > t0) s.prompt_tps = usage.prompt_tokens / ((tFirst - t0) / 1000);
  if (timings && timings.predicted_per_second) s.gen_tps = timings.predicted_per_second;
  else if (tFirst !== null && tEnd > tFirst && usage.completion_tokens > 1)
    s.gen_tps = (usage.completion_tokens - 1) / ((tEnd - tFirst) / 1000);
  return s;
}

function statsText(s) {
  const rate = (v) => (v ? ' at ' + v.toFixed(1) + ' tok/s' : '');
  let text = 'prompt ' + s.prompt_tokens + ' tokens' + rate(s.prompt_tps) +
    ' · generated ' + s.completion_tokens + ' tokens' + rate(s.gen_tps);
  const used = s.prompt_tokens + s.completion_tokens;
  if (s.context) text += ' · context ' + used + ' / ' + s.context + ' (' + Math.round(100 * used / s.context) + '%)';
  return text;
}

function setBusy(busy) {
  $('send').hidden = busy;
  $('stop').hidden = !busy;
  document.body.classList.toggle('busy', busy);
  renderMessages();
}

async function send() {
  const text = $('input').value;
  if (!text.trim() || state.controller) return;
  const conv = conversation() || newConversation();
  if (conv.title === 'New chat') conv.title = text.trim().slice(0, kTitleLength);
  conv.messages.push({role: 'user', content: text});
  $('input').value = '';
  save();
  renderConversations();
  await generate(conv);
}

function regenerate() {
  const conv = conversation();
  if (!conv || state.controller) return;
  while (conv.messages.length && conv.messages[conv.messages.length - 1].role === 'assistant') conv.messages.pop();
  if (conv.messages.length) generate(conv);
}

// The last user message goes back into the box; it and the answers after it leave the history.
function editLast() {
  const conv = conversation();
  if (!conv || state.controller) return;
  let i = conv.messages.length - 1;
  while (i >= 0 && conv.messages[i].role !== 'user') i--;
  if (i < 0) return;
  $('input').value = conv.messages[i].content;
  conv.messages.splice(i);
  save();
  renderMessages();
  $('input').focus();
}

// ---- rendering -----------------------------------------------------------------------------

function setNotice(text) {
  $('model-devices').textContent = text;
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function renderConversations() {
  const ul = $('conversations');
  ul.replaceChildren();
  for (const c of state.conversations) {
    const li = el('li', c.id === state.current ? 'current' : '');
    const title = el('button', 'title', c.title || 'Untitled');
    title.type = 'button';
    title.onclick = () => {
      if (state.controller) return;
      state.current = c.id;
      save();
      render();
      document.body.classList.remove('sidebar-open');
    };
    const rename = el('button', 'rename', '✎');
    rename.type = 'button';
    rename.title = 'Rename';
    rename.onclick = () => {
      const name = prompt('Name of this conversation', c.title);
      if (name && name.trim()) {
        c.title = name.trim();
        save();
        renderConversations();
      }
    };
    const del = el('button', 'delete', '✕');
    del.type = 'button';
    del.title = 'Delete';
    del.onclick = () => {
      if (state.controller && c.id === state.current) return;
      if (!confirm('Delete "' + c.title + '"?')) return;
      state.conversations = state.conversations.filter((x) => x !== c);
      if (state.current === c.id) state.current = state.conversations.length ? state.conversations[0].id : null;
      save();
      render();
    };
    li.append(title, rename, del);
    ul.append(li);
  }
}

// Fills a message's element; the parts that stream (reasoning, text, tool calls) are updated in
// place so that an opened <details> stays open.
function updateMessage(index, msg) {
  const box = $('messages').querySelector('[data-index="' + index + '"]');
  if (!box) return;
  if (msg.reasoning) {
    let details = box.querySelector('details.reasoning');
    if (!details) {
      details = el('details', 'reasoning');
      details.append(el('summary', '', 'Reasoning'), el('div', 'reasoning-text'));
      box.querySelector('.body').before(details);
    }
    details.querySelector('.reasoning-text').textContent = msg.reasoning;
  }
  const body = box.querySelector('.body');
  if (msg.role === 'assistant') body.innerHTML = renderMarkdown(msg.content);  // escaped inside
  else body.textContent = msg.content;
  const calls = box.querySelector('.tool-calls');
  calls.replaceChildren();
  for (const call of msg.tool_calls || []) {
    if (!call) continue;
    const details = el('details', 'tool-call');
    details.append(el('summary', '', 'Tool call: ' + call.name), el('pre', '', call.arguments));
    calls.append(details);
  }
}

function renderMessages() {
  const conv = conversation();
  const list = $('messages');
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  list.replaceChildren();
  if (!conv || !conv.messages.length) {
    list.append(el('p', 'empty', 'Ask something. Enter sends, Shift+Enter starts a new line.'));
    return;
  }
  const busy = !!state.controller;
  const lastUser = conv.messages.map((m) => m.role).lastIndexOf('user');
  conv.messages.forEach((msg, i) => {
    const box = el('div', 'msg ' + msg.role);
    box.dataset.index = i;
    box.append(el('div', 'role', msg.role === 'user' ? 'You' : state.info.model || 'assistant'),
               el('div', msg.role === 'assistant' ? 'body markdown' : 'body'), el('div', 'tool-calls'));
    const meta = el('div', 'meta');
    if (msg.error) meta.append(el('span', 'error', msg.error));
    if (msg.stopped) meta.append(el('span', 'stopped', 'Stopped.'));
    if (msg.finish_reason === 'length') meta.append(el('span', 'stopped', 'Cut at the token limit.'));
    if (msg.stats) meta.append(el('span', 'stats', statsText(msg.stats)));
    box.append(meta);
    const last = i === conv.messages.length - 1;
    if (!busy && (i === lastUser || (last && msg.role === 'assistant'))) {
      const actions = el('div', 'actions');
      if (i === lastUser) {
        const edit = el('button', 'edit', 'Edit and resend');
        edit.type = 'button';
        edit.onclick = editLast;
        actions.append(edit);
      }
      if (last && msg.role === 'assistant') {
        const again = el('button', 'regenerate', 'Regenerate');
        again.type = 'button';
        again.onclick = regenerate;
        actions.append(again);
      }
      box.append(actions);
    }
    list.append(box);
    updateMessage(i, msg);
  });
  if (atBottom || busy) list.scrollTop = list.scrollHeight;
}

function render() {
  renderConversations();
  renderMessages();
}

// ---- settings ------------------------------------------------------------------------------

const kSettingFields = {system: 'set-system', temperature: 'set-temperature', top_p: 'set-top-p',
                        max_tokens: 'set-max-tokens', seed: 'set-seed', extra: 'set-extra'};

function openSettings() {
  for (const [name, id] of Object.entries(kSettingFields)) $(id).value = state.settings[name];
  $('settings-error').hidden = true;
  $('settings').showModal();
}

function saveSettings() {
  const next = {};
  for (const [name, id] of Object.entries(kSettingFields)) next[name] = $(id).value;
  const previous = state.settings;
  state.settings = next;
  try {
    for (const [name, integer] of [['temperature', false], ['top_p', false], ['max_tokens', true], ['seed', true]])
      numberSetting(name, integer);
    if (next.extra.trim()) {
      const extra = JSON.parse(next.extra);
      if (typeof extra !== 'object' || extra === null || Array.isArray(extra))
        throw new Error('more request fields must be a JSON object');
    }
  } catch (e) {
    state.settings = previous;
    $('settings-error').textContent = e.message;
    $('settings-error').hidden = false;
    return;
  }
  save();
  $('settings').close();
}

// ---- start ---------------------------------------------------------------------------------

// Copies a code block's text: the clipboard API where the page is a secure context (localhost,
// https), else a selection and execCommand, which plain-http pages on a LAN still allow.
function copyCode(button) {
  const code = button.closest('.code').querySelector('code').textContent;
  const done = () => {
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(code).then(done, () => {});
    return;
  }
  const range = document.createRange();
  range.selectNodeContents(button.closest('.code').querySelector('code'));
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  if (document.execCommand('copy')) done();
  selection.removeAllRanges();
}

function start() {
  loadState();
  if (!conversation()) state.current = state.conversations.length ? state.conversations[0].id : null;
  $('send').onclick = send;
  $('stop').onclick = () => state.controller && state.controller.abort();
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('new-chat').onclick = () => {
    if (state.controller) return;
    newConversation();
    save();
    render();
    document.body.classList.remove('sidebar-open');
    $('input').focus();
  };
  $('toggle-sidebar').onclick = () => document.body.classList.toggle('sidebar-open');
  $('open-settings').onclick = openSettings;
  $('settings-save').onclick = saveSettings;
  $('settings-cancel').onclick = () => $('settings').close();
  $('set-key').onclick = async () => {
    const key = await askKey('The API key of this server (--api-key), kept for this tab only.');
    if (key) {
      sessionStorage.setItem(kApiKey, key);
      loadInfo();
    }
  };
  $('messages').addEventListener('click', (e) => {
    if (e.target.classList.contains('copy')) copyCode(e.target);
  });
  render();
  loadInfo();
}

document.addEventListener('DOMContentLoaded', start);
