// The playground page: a Slack-like channel over the local Slack stand-in.
// Every text from a payload reaches the DOM as a text node or an attribute value; nothing from a
// payload is ever parsed as HTML, so a message or a modal cannot inject markup.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  /** Build an element; children may be nodes or strings (strings become text nodes). */
  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "className") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  // ---------------------------------------------------------------- state

  let state = null;
  let me = new URLSearchParams(location.search).get("as") || localStorage.getItem("pg-as");
  let channel = null;
  let openThread = null; // ts of the thread shown in the side pane
  let homeOpen = false; // the app's Home tab is shown instead of the channel
  let shownHome = null; // what the Home pane shows, so live updates keep what was picked
  const homeValues = {}; // block_id -> action_id -> value, as Slack's view state
  let awaitingThread = null; // text we just sent: open its thread once it shows up
  const localValues = {}; // message ts -> block_id -> action_id -> value, as Slack's state.values
  const viewErrors = {}; // view id -> {block_id: message}
  const rendered = { main: new Map(), thread: new Map() };

  const userById = (id) => (state && state.users.find((u) => u.id === id)) || null;
  const userName = (id) => {
    const user = userById(id);
    return user ? user.name : id;
  };
  const channelName = (id) => {
    const found = state && state.channels.find((c) => c.id === id);
    return found ? found.name : id;
  };

  async function api(path, body) {
    const init = body === undefined ? {} : {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    };
    const response = await fetch(path, init);
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      toast(data.error || `${response.status} ${response.statusText}`);
      throw new Error(data.error || response.statusText);
    }
    return data;
  }

  function toast(text) {
    const node = $("toast");
    node.textContent = text;
    node.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { node.hidden = true; }, 4000);
  }

  // ---------------------------------------------------------------- mrkdwn

  const EMOJI = {
    eyes: "👀", white_check_mark: "✅", heavy_check_mark: "✔️", x: "❌", hourglass: "⌛",
    hourglass_flowing_sand: "⏳", thumbsup: "👍", "+1": "👍", thumbsdown: "👎", rocket: "🚀",
    warning: "⚠️", no_entry: "⛔", thinking_face: "🤔", robot_face: "🤖", tada: "🎉",
    speech_balloon: "💬", question: "❓", lock: "🔒", stopwatch: "⏱️", memo: "📝",
    no_entry_sign: "🚫", clock1: "🕐", alarm_clock: "⏰", arrows_counterclockwise: "🔄",
    bell: "🔔", arrow_up: "⬆️", unlock: "🔓", key: "🔑", octagonal_sign: "🛑",
    information_source: "ℹ️", hourglass_done: "⌛", gear: "⚙️", wrench: "🔧",
    hammer_and_wrench: "🛠️", fire: "🔥", bulb: "💡", pencil2: "✏️", mag: "🔍",
    large_green_circle: "🟢", red_circle: "🔴", large_yellow_circle: "🟡", point_right: "👉",
    raised_hand: "✋", ok_hand: "👌", wave: "👋", clipboard: "📋", calendar: "📆",
    package: "📦", link: "🔗", shield: "🛡️", sparkles: "✨", zap: "⚡", boom: "💥",
    arrow_right: "➡️", arrow_down: "⬇️", heavy_plus_sign: "➕", heavy_minus_sign: "➖",
    construction: "🚧", bug: "🐛", checkered_flag: "🏁", hourglass_not_done: "⏳",
  };


  const ENTITIES = { "&lt;": "<", "&gt;": ">", "&amp;": "&" };
  const unescape = (text) => text.replace(/&(lt|gt|amp);/g, (m) => ENTITIES[m]);

  function safeHref(url) {
    try {
      const parsed = new URL(url);
      return ["http:", "https:", "mailto:"].includes(parsed.protocol) ? parsed.href : null;
    } catch {
      return null;
    }
  }

  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December"];
  const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
  const ordinal = (n) => {
    const tail = n % 100 >= 11 && n % 100 <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th");
    return `${n}${tail}`;
  };
  const pad = (n) => String(n).padStart(2, "0");
  // Slack shows times by the reader's 12- or 24-hour preference; the browser's locale stands in.
  const timeOf = (d, seconds = false) => d.toLocaleTimeString([], {
    hour: "numeric", minute: "2-digit", ...(seconds ? { second: "2-digit" } : {}),
  });

  function ago(d) {
    const secs = Math.round((Date.now() - d.getTime()) / 1000);
    const abs = Math.abs(secs);
    const [n, unit] = abs < 60 ? [abs, "second"] : abs < 3600 ? [Math.round(abs / 60), "minute"]
      : abs < 86400 ? [Math.round(abs / 3600), "hour"] : [Math.round(abs / 86400), "day"];
    const phrase = `${n} ${unit}${n === 1 ? "" : "s"}`;
    return secs >= 0 ? `${phrase} ago` : `in ${phrase}`;
  }

  /** Slack's `<!date^seconds^format|fallback>` tokens, in the viewer's time zone, worded as Slack
   * words them: "{date_short_pretty} at {time}" reads "today at 2:05 PM" or "Dec 1, 2026 at 2:05 PM"
   * (the relative words in lower case, so they fit mid-sentence). */
  function formatDate(seconds, format) {
    const d = new Date(seconds * 1000);
    if (Number.isNaN(d.getTime())) return null;
    const dayDiff = Math.round((new Date(d).setHours(0, 0, 0, 0) - new Date().setHours(0, 0, 0, 0)) / 864e5);
    const relative = { 0: "today", [-1]: "yesterday", 1: "tomorrow" }[dayDiff];
    const month = MONTHS[d.getMonth()];
    const year = d.getFullYear();
    const date = `${month} ${ordinal(d.getDate())}, ${year}`;
    const dateShort = `${month.slice(0, 3)} ${d.getDate()}, ${year}`;
    const dateLong = `${DAYS[d.getDay()]}, ${date}`;
    const sameYear = year === new Date().getFullYear();
    const tokens = {
      date_num: `${year}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`,
      date_slash: d.toLocaleDateString([], { day: "2-digit", month: "2-digit", year: "numeric" }),
      date, date_short: dateShort, date_long: dateLong,
      date_long_full: `${month} ${d.getDate()}, ${year}`,
      date_pretty: relative || date,
      date_short_pretty: relative || dateShort,
      date_long_pretty: relative || dateLong,
      day_divider_pretty: relative || (sameYear ? `${DAYS[d.getDay()]}, ${month} ${ordinal(d.getDate())}` : dateLong),
      time: timeOf(d),
      time_secs: timeOf(d, true),
    };
    return format.replace(/\{(\w+)\}/g, (m, name) => (name === "ago" ? ago(d) : tokens[name] ?? m));
  }

  /** One `<...>` token: a link, a mention, a channel, a special mention or a date. */
  function angle(inner) {
    const [target, label] = splitOnce(inner, "|");
    if (target.startsWith("@")) {
      const id = target.slice(1);
      return h("span", { className: `mention${id === me ? " me" : ""}` }, `@${label || userName(id)}`);
    }
    if (target.startsWith("#")) {
      return h("span", { className: "mention" }, `#${label || channelName(target.slice(1))}`);
    }
    if (target.startsWith("!date^")) {
      // `<!date^seconds^format^optional link|fallback>`: the fallback only when it cannot be shown.
      const [, seconds, format, link] = target.split("^");
      const shown = /^-?\d+$/.test(seconds || "") && format ? formatDate(Number(seconds), unescape(format)) : null;
      const text = shown ?? unescape(label || "");
      const href = link && safeHref(unescape(link));
      return href ? h("a", { href, target: "_blank", rel: "noopener noreferrer" }, text) : document.createTextNode(text);
    }
    if (target.startsWith("!subteam^")) {
      return h("span", { className: "mention" }, unescape(label || "@group"));
    }
    if (target.startsWith("!")) {
      return h("span", { className: "mention" }, `@${label ? unescape(label) : target.slice(1)}`);
    }
    const href = safeHref(unescape(target));
    const text = unescape(label || target);
    if (!href) return document.createTextNode(text);
    return h("a", { href, target: "_blank", rel: "noopener noreferrer" }, text);
  }

  function splitOnce(text, sep) {
    const at = text.indexOf(sep);
    return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + 1)];
  }

  // Formatting markers must hug their text and sit at word edges, as in Slack.
  const INLINE = /<([^<>\n]+)>|`([^`\n]+)`|(?<![\w*])\*(?!\s)([^*\n]+?)\*(?![\w*])|(?<![\w_])_(?!\s)([^_\n]+?)_(?![\w_])|(?<![\w~])~(?!\s)([^~\n]+?)~(?![\w~])/g;

  const emoji = (text) => text.replace(/:([a-z0-9_+-]+):/g, (m, name) => EMOJI[name] || m);

  function inline(text, parent) {
    let last = 0;
    for (const match of text.matchAll(INLINE)) {
      if (match.index > last) parent.append(emoji(unescape(text.slice(last, match.index))));
      const [, link, code, bold, italic, strike] = match;
      if (link !== undefined) parent.append(angle(link));
      else if (code !== undefined) parent.append(h("code", {}, unescape(code)));
      else {
        const node = h(bold !== undefined ? "b" : italic !== undefined ? "i" : "s");
        inline(bold ?? italic ?? strike, node);
        parent.append(node);
      }
      last = match.index + match[0].length;
    }
    if (last < text.length) parent.append(emoji(unescape(text.slice(last))));
  }

  /** Render Slack mrkdwn into a new element. */
  function mrkdwn(text, tag = "div") {
    const root = h(tag, { className: "mrkdwn" });
    const parts = String(text ?? "").split("```");
    parts.forEach((part, index) => {
      if (index % 2 === 1 && index < parts.length - 1) {
        root.append(h("pre", {}, unescape(part.replace(/^\n/, ""))));
        return;
      }
      const chunk = index % 2 === 1 ? "```" + part : part;
      const lines = chunk.split("\n");
      let quote = null;
      lines.forEach((line, i) => {
        const quoted = /^(>|&gt;)\s?/.exec(line);
        if (quoted) {
          if (!quote) { quote = h("blockquote"); root.append(quote); }
          else quote.append("\n");
          inline(line.slice(quoted[0].length), quote);
          return;
        }
        quote = null;
        inline(line, root);
        if (i < lines.length - 1) root.append("\n");
      });
    });
    return root;
  }

  /** A Block Kit text object (plain_text or mrkdwn). */
  function textObject(obj, tag = "span") {
    if (!obj) return h(tag);
    if (obj.type === "mrkdwn") return mrkdwn(obj.text, tag);
    return h(tag, {}, String(obj.text ?? ""));
  }
  const plain = (obj) => (obj ? String(obj.text ?? "") : "");

  // ---------------------------------------------------------------- Block Kit

  /** Context for interactive elements: where a change or click goes. */
  function messageContext(message) {
    return {
      kind: "message",
      values: (localValues[message.ts] ||= {}),
      dispatch: (action) => sendAction(message, action),
    };
  }

  function rememberValue(ctx, blockId, actionId, value) {
    (ctx.values[blockId] ||= {})[actionId] = value;
  }

  const optionKey = (option) => option.value ?? plain(option.text);
  const optionPayload = (option) => ({ text: option.text, value: option.value });

  function allOptions(element) {
    if (element.option_groups) return element.option_groups.flatMap((g) => g.options || []);
    return element.options || [];
  }

  function element(el, ctx, blockId) {
    const actionId = el.action_id || "";
    const base = { action_id: actionId, block_id: blockId, type: el.type };
    switch (el.type) {
      case "button": {
        const styleClass = el.style === "primary" ? " primary" : el.style === "danger" ? " danger" : "";
        return h("button", {
          type: "button", className: `btn${styleClass}`, dataset: { actionId },
          onclick: () => withConfirm(el.confirm, () => {
            const href = el.url && safeHref(el.url);
            if (href) window.open(href, "_blank", "noopener");
            ctx.dispatch({ ...base, text: el.text, value: el.value, style: el.style });
          }),
        }, plain(el.text));
      }
      case "static_select":
      case "external_select":
      case "users_select":
      case "conversations_select":
      case "channels_select": {
        const options = el.type === "users_select"
          ? state.users.map((u) => ({ text: { type: "plain_text", text: u.name }, value: u.id }))
          : el.type === "static_select" ? allOptions(el) : [];
        const select = h("select", { className: "select", dataset: { actionId }, "aria-label": plain(el.placeholder) || "Select" },
          h("option", { value: "" }, plain(el.placeholder) || "Select an option"));
        const groups = el.type === "static_select" && el.option_groups
          ? el.option_groups.map((g) => [plain(g.label), g.options || []]) : [[null, options]];
        for (const [label, list] of groups) {
          const target = label ? h("optgroup", { label }) : select;
          for (const option of list) target.append(h("option", { value: optionKey(option) }, plain(option.text)));
          if (label) select.append(target);
        }
        const stored = ctx.values[blockId]?.[actionId];
        const initial = stored ? stored.selected_option?.value ?? stored.selected_user
          : el.initial_option?.value ?? el.initial_user;
        if (initial) select.value = initial;
        select.addEventListener("change", () => {
          const option = options.find((o) => optionKey(o) === select.value);
          const value = el.type === "users_select"
            ? { type: el.type, selected_user: select.value || null }
            : { type: el.type, selected_option: option ? optionPayload(option) : null };
          rememberValue(ctx, blockId, actionId, value);
          if (option || el.type === "users_select") ctx.dispatch({ ...base, ...value });
        });
        // As in Slack, a pre-selected option (initial_option) is in the submitted state too.
        const preselected = el.type === "users_select" ? null : options.find((o) => optionKey(o) === select.value);
        if (preselected) rememberValue(ctx, blockId, actionId, { type: el.type, selected_option: optionPayload(preselected) });
        else if (!select.value) rememberValue(ctx, blockId, actionId, { type: el.type, selected_option: null });
        return select;
      }
      case "multi_static_select":
      case "checkboxes":
      case "radio_buttons": {
        const options = allOptions(el);
        const multiple = el.type !== "radio_buttons";
        const stored = ctx.values[blockId]?.[actionId];
        const initial = stored
          ? (stored.selected_options || (stored.selected_option ? [stored.selected_option] : []))
          : (el.initial_options || (el.initial_option ? [el.initial_option] : []));
        const chosen = new Set(initial.map(optionKey));
        const box = h("div", {
          className: el.type === "multi_static_select" ? "multi" : "choices",
          role: multiple ? "group" : "radiogroup", dataset: { actionId },
          "aria-label": plain(el.placeholder) || "Options",
        });
        if (el.type === "multi_static_select" && el.placeholder) {
          box.append(h("div", { className: "multi-title" }, plain(el.placeholder)));
        }
        const radioName = `r-${blockId}-${actionId}-${Math.random().toString(36).slice(2)}`;
        const current = () => options.filter((o) => chosen.has(optionKey(o))).map(optionPayload);
        const valueOf = () => (multiple
          ? { type: el.type, selected_options: current() }
          : { type: el.type, selected_option: current()[0] || null });
        for (const option of options) {
          const key = optionKey(option);
          const input = h("input", {
            type: multiple ? "checkbox" : "radio", name: radioName, value: key,
            checked: chosen.has(key),
          });
          input.addEventListener("change", () => {
            if (!multiple) chosen.clear();
            if (input.checked) chosen.add(key); else chosen.delete(key);
            rememberValue(ctx, blockId, actionId, valueOf());
            ctx.dispatch({ ...base, ...valueOf() });
          });
          const label = h("label", { className: "choice" }, input, textObject(option.text));
          if (option.description) label.append(h("span", { className: "input-hint" }, plain(option.description)));
          box.append(label);
        }
        rememberValue(ctx, blockId, actionId, valueOf());
        return box;
      }
      case "datepicker": {
        const stored = ctx.values[blockId]?.[actionId];
        const input = h("input", {
          type: "date", className: "date", dataset: { actionId },
          "aria-label": plain(el.placeholder) || "Date",
        });
        input.value = stored?.selected_date ?? el.initial_date ?? "";
        const valueOf = () => ({ type: "datepicker", selected_date: input.value || null });
        input.addEventListener("change", () => {
          rememberValue(ctx, blockId, actionId, valueOf());
          ctx.dispatch({ ...base, ...valueOf() });
        });
        rememberValue(ctx, blockId, actionId, valueOf());
        return input;
      }
      case "plain_text_input":
      case "number_input":
      case "email_text_input":
      case "url_text_input": {
        const stored = ctx.values[blockId]?.[actionId];
        const props = {
          className: "text-input", dataset: { actionId },
          placeholder: plain(el.placeholder) || undefined,
        };
        let input;
        if (el.multiline) input = h("textarea", props);
        else {
          const type = { number_input: "number", email_text_input: "email", url_text_input: "url" }[el.type] || "text";
          input = h("input", { ...props, type, step: el.type === "number_input" ? (el.is_decimal_allowed ? "any" : "1") : undefined });
          if (el.type === "number_input") {
            if (el.min_value !== undefined) input.min = el.min_value;
            if (el.max_value !== undefined) input.max = el.max_value;
          }
        }
        if (el.max_length) input.maxLength = el.max_length;
        input.value = stored?.value ?? el.initial_value ?? "";
        const valueOf = () => ({ type: el.type, value: input.value === "" ? null : input.value });
        input.addEventListener("input", () => rememberValue(ctx, blockId, actionId, valueOf()));
        rememberValue(ctx, blockId, actionId, valueOf());
        return input;
      }
      case "overflow": {
        const options = el.options || [];
        const select = h("select", { className: "select", dataset: { actionId }, "aria-label": "More" },
          h("option", { value: "" }, "⋯"),
          options.map((o) => h("option", { value: optionKey(o) }, plain(o.text))));
        select.addEventListener("change", () => {
          const option = options.find((o) => optionKey(o) === select.value);
          if (option) ctx.dispatch({ ...base, selected_option: optionPayload(option) });
        });
        return select;
      }
      case "image":
        return h("span", { className: "b-image" }, `[image: ${el.alt_text || ""}]`);
      case "plain_text":
      case "mrkdwn":
        return textObject(el);
      default:
        return h("span", { className: "fallback" }, `[${el.type}]`);
    }
  }

  function withConfirm(confirm, go) {
    if (!confirm) { go(); return; }
    const close = () => dialog.remove();
    const dialog = h("div", { className: "modal-backdrop", dataset: { confirm: "" } },
      h("div", { className: "modal", role: "dialog", "aria-label": plain(confirm.title) || "Confirm" },
        h("div", { className: "modal-title" }, plain(confirm.title) || "Are you sure?"),
        h("div", { className: "modal-body" }, textObject(confirm.text, "div")),
        h("div", { className: "modal-foot" },
          h("button", { type: "button", className: "btn", onclick: close }, plain(confirm.deny) || "Cancel"),
          h("button", {
            type: "button", className: `btn ${confirm.style === "danger" ? "danger" : "primary"}`,
            onclick: () => { close(); go(); },
          }, plain(confirm.confirm) || "Yes"))));
    document.body.append(dialog);
  }

  function blocks(list, ctx) {
    const root = h("div", { className: "blocks" });
    for (const block of list || []) root.append(renderBlock(block, ctx));
    return root;
  }

  function renderBlock(block, ctx) {
    const blockId = block.block_id || "";
    const wrap = (cls, ...children) => h("div", { className: `block ${cls}`, dataset: { blockId } }, ...children);
    switch (block.type) {
      case "header":
        return wrap("b-header", plain(block.text));
      case "section": {
        const main = h("div", { className: "sec-main" });
        if (block.text) main.append(textObject(block.text, "div"));
        if (block.fields) main.append(h("div", { className: "fields" }, block.fields.map((f) => textObject(f, "div"))));
        const node = wrap("b-section", main);
        if (block.accessory) node.append(element(block.accessory, ctx, blockId));
        return node;
      }
      case "context":
        return wrap("b-context", (block.elements || []).map((e) => element(e, ctx, blockId)));
      case "divider":
        return h("hr", { className: "b-divider" });
      case "actions":
        return wrap("b-actions", (block.elements || []).map((e) => element(e, ctx, blockId)));
      case "input": {
        // Slack sends an input's changes only when its block asks to (`dispatch_action`).
        const inputCtx = block.dispatch_action ? ctx : { ...ctx, dispatch: () => {} };
        const control = element(block.element || {}, inputCtx, blockId);
        const error = ctx.errors?.[blockId];
        const node = wrap(`input-block${error ? " invalid" : ""}`,
          h("label", { className: "input-label" }, plain(block.label),
            block.optional ? h("span", { className: "optional" }, " (optional)") : null),
          control,
          block.hint ? h("div", { className: "input-hint" }, plain(block.hint)) : null,
          error ? h("div", { className: "input-error", role: "alert" }, String(error)) : null);
        return node;
      }
      case "image":
        return wrap("b-image", `[image: ${block.alt_text || ""}]`);
      case "rich_text":
        return wrap("b-rich", richText(block));
      default:
        return wrap("fallback", `[unsupported block: ${block.type}]`);
    }
  }

  function richText(block) {
    const root = h("div", { className: "mrkdwn" });
    const walk = (items, parent) => {
      for (const item of items || []) {
        if (item.type === "text") {
          let node = document.createTextNode(item.text || "");
          const style = item.style || {};
          if (style.code) node = h("code", {}, node);
          if (style.bold) node = h("b", {}, node);
          if (style.italic) node = h("i", {}, node);
          if (style.strike) node = h("s", {}, node);
          parent.append(node);
        } else if (item.type === "user") parent.append(angle(`@${item.user_id}`));
        else if (item.type === "link") parent.append(angle(`${item.url}|${item.text || item.url}`));
        else if (item.elements) walk(item.elements, parent);
      }
    };
    walk(block.elements, root);
    return root;
  }

  // ---------------------------------------------------------------- messages

  const COLORS = ["#e01e5a", "#2eb67d", "#1264a3", "#ecb22e", "#9b59b6", "#e67e22", "#16a085"];
  function avatar(userId) {
    const user = userById(userId);
    const name = user ? user.name : userId || "?";
    let hash = 0;
    for (const ch of String(userId)) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
    const color = user && user.is_bot ? "#4a154b" : COLORS[hash % COLORS.length];
    return h("div", { className: "avatar", style: `background:${color}` }, name.slice(0, 1).toUpperCase());
  }


  // A message's ts is when it was posted (seconds since the epoch), as in Slack.
  const postedAt = (ts) => new Date(Number(ts) * 1000);

  function messageNode(message, { inThread }) {
    const author = userById(message.user);
    const meta = h("div", { className: "msg-meta" },
      h("span", { className: "msg-author" }, author ? author.real_name || author.name : message.user || "bot"),
      author && author.is_bot ? h("span", { className: "app-tag" }, "APP") : null,
      h("span", {
        className: "msg-time", dataset: { ts: message.ts },
        title: postedAt(message.ts).toLocaleString([], { dateStyle: "full", timeStyle: "medium" }),
      }, timeOf(postedAt(message.ts))),
      message.edited ? h("span", { className: "edited" }, "(edited)") : null,
      message.ephemeral_to ? h("span", { className: "only-you" }, "Only visible to you") : null);
    const body = h("div", { className: "msg-body" }, meta);
    if (message.chunks && message.chunks.length) body.append(...streamed(message));
    else if (message.blocks && message.blocks.length) body.append(blocks(message.blocks, messageContext(message)));
    else body.append(mrkdwn(message.text));
    if (message.reactions && message.reactions.length) {
      body.append(h("div", { className: "reactions" }, message.reactions.map((r) =>
        h("span", { className: "reaction", title: `:${r.name}:` }, `${EMOJI[r.name] || `:${r.name}:`} ${r.users.length}`))));
    }
    const replies = !inThread && !message.thread_ts_parent ? replyCount(message) : 0;
    if (replies) {
      body.append(h("button", {
        type: "button", className: "replies", onclick: () => showThread(message.ts),
      }, `${replies} ${replies === 1 ? "reply" : "replies"}`));
    }
    return h("div", {
      className: `msg${message.ephemeral_to ? " ephemeral" : ""}`,
      dataset: { ts: message.ts, user: message.user || "" },
    }, avatar(message.user), body);
  }

  const TASK_ICONS = { pending: "⏸", in_progress: "⏳", complete: "✅", error: "⚠️" };

  /** A streamed message as Slack shows it: its tasks (each as its latest update left it), then
   * the text so far, with a cursor while it still streams. Titles and outputs are the bot's
   * escaped mrkdwn, like message text. */
  function streamed(message) {
    const tasks = new Map();
    for (const chunk of message.chunks) {
      if (chunk.type === "task_update") tasks.set(chunk.id, { ...(tasks.get(chunk.id) || {}), ...chunk });
    }
    const nodes = [];
    if (tasks.size) {
      nodes.push(h("div", { className: "tasks" }, [...tasks.values()].map((task) => h("div", {
        className: `task ${task.status}`, dataset: { status: task.status },
      }, h("span", { className: "task-icon" }, TASK_ICONS[task.status] || "•"),
      h("span", { className: "task-title" }, mrkdwn(task.title)),
      task.output ? h("div", { className: "task-output" }, mrkdwn(task.output)) : null))));
    }
    if (message.text) nodes.push(mrkdwn(message.text));
    if (message.streaming) nodes.push(h("span", { className: "cursor", title: "Streaming" }, "▍"));
    return nodes;
  }

  const SESSION_WORDS = {
    processing: "is working…", suspended: "is waiting on someone", active: "answered", closed: "closed",
  };

  function renderSession(threadTs) {
    const session = state.statuses.find((s) => s.channel === channel && s.thread_ts === threadTs);
    const line = $("thread-status");
    line.hidden = !session;
    if (!session) return;
    const chip = h("span", { className: `chip ${session.status}`, dataset: { status: session.status } },
      `${userName(state.bot_user_id)} ${SESSION_WORDS[session.status] || session.status}`);
    const stop = session.status === "processing" ? h("button", {
      type: "button", className: "stop", title: "Stop the agent",
      onclick: () => api("/api/stop", { user: me, channel, thread_ts: threadTs }).catch(() => {}),
    }, "■ Stop") : null;
    line.replaceChildren(chip, stop || "");
  }

  const isReply = (m) => m.thread_ts && m.thread_ts !== m.ts;
  // Like Slack, ephemerals do not count as replies.
  const replyCount = (parent) => state.messages.filter((m) => m.channel === parent.channel
    && isReply(m) && m.thread_ts === parent.ts && !m.ephemeral_to).length;

  /** Re-render a list, reusing nodes whose message did not change (keeps focus and scroll). */
  function renderList(container, cache, list, opts) {
    const atBottom = container.scrollHeight - container.scrollTop - container.clientHeight < 40;
    const seen = new Set();
    const nodes = list.map((message) => {
      const key = message.ts + (message.ephemeral_to ? `:e:${message.ephemeral_to}` : "");
      const sig = JSON.stringify([message, opts.inThread ? 0 : replyCount(message), me]);
      seen.add(key);
      const hit = cache.get(key);
      if (hit && hit.sig === sig) return hit.node;
      const node = messageNode(message, opts);
      cache.set(key, { sig, node });
      return node;
    });
    for (const key of [...cache.keys()]) if (!seen.has(key)) cache.delete(key);
    const same = nodes.length === container.children.length && nodes.every((n, i) => container.children[i] === n);
    if (!same) container.replaceChildren(...nodes);
    if (!list.length) container.replaceChildren(h("div", { className: "empty" }, opts.empty));
    if (atBottom || !same) container.scrollTop = container.scrollHeight;
  }

  function render() {
    if (!state) return;
    const model = $("model");
    model.textContent = state.model.label;
    model.classList.toggle("offline", state.model.offline);
    $("channel-name").textContent = `# ${channelName(channel)}`;
    // The channel's composer always starts a new conversation; say so, so nobody mistakes it for
    // a reply to the thread they just closed.
    $("composer-to").textContent = `To #${channelName(channel)}: a new request to @${userName(state.bot_user_id)}, in its own thread.`;
    $("composer-input").placeholder = `Message #${channelName(channel)}, e.g. deploy api 2.3 to prod`;
    $("hint").replaceChildren(...(state.examples.length ? [h("div", {}, "Try:")] : []),
      ...state.examples.map((e) => h("div", {
        className: "example", title: "Put in the message box",
        onclick: () => { $("composer-input").value = e; $("composer-input").focus(); },
      }, h("code", {}, e))));

    const humans = state.users.filter((u) => !u.is_bot);
    const picker = $("as");
    if (picker.options.length !== humans.length) {
      picker.replaceChildren(...humans.map((u) => h("option", { value: u.id }, `${u.name}${u.role ? ` (${u.role})` : ""}`)));
    }
    picker.value = me;
    $("people").replaceChildren(...humans.map((u) => h("li", {
      className: u.id === me ? "active" : "", dataset: { user: u.id }, onclick: () => actAs(u.id),
    }, u.real_name || u.name, u.role ? h("span", { className: "role" }, u.role) : null)));
    $("channels").replaceChildren(...state.channels.map((c) => h("li", {
      className: c.id === channel && !homeOpen ? "active" : "",
      onclick: () => { channel = c.id; openThread = null; homeOpen = false; render(); },
    }, `# ${c.name}`)));
    $("home-tab").className = homeOpen ? "active" : "";
    $("messages").hidden = homeOpen;
    $("composer").hidden = homeOpen;
    $("home").hidden = !homeOpen;
    if (homeOpen) {
      $("channel-name").textContent = `${userName(state.bot_user_id)} · Home`;
      renderHome();
    }

    const visible = state.messages.filter((m) => m.channel === channel && (!m.ephemeral_to || m.ephemeral_to === me));
    renderList($("messages"), rendered.main, visible.filter((m) => !isReply(m)), {
      inThread: false, empty: "No messages yet. Say hello to the bot below.",
    });

    if (awaitingThread) {
      // A slash command's thread starts with the bot's "<@me> ran /command ..." message.
      const mine = awaitingThread.startsWith("/")
        // The command's own message; a command run from its form says `name=value` instead.
        ? visible.filter((m) => !isReply(m) && (m.text === `<@${me}> ran ${awaitingThread}`
          || m.text.startsWith(`<@${me}> ran ${awaitingThread.split(/\s/)[0]} `)))
        : visible.filter((m) => !isReply(m) && m.user === me && m.text.includes(awaitingThread));
      if (mine.length) { openThread = mine[mine.length - 1].ts; awaitingThread = null; }
    }
    const pane = $("thread");
    const parent = openThread && visible.find((m) => m.ts === openThread);
    pane.hidden = !parent;
    // Like Slack, the channel marks the message whose thread is open.
    for (const node of $("messages").children) node.classList.toggle("open", Boolean(parent) && node.dataset.ts === openThread);
    if (parent) {
      $("thread-channel").textContent = `#${channelName(channel)}`;
      const thread = [parent, ...visible.filter((m) => isReply(m) && m.thread_ts === openThread)];
      renderList($("thread-messages"), rendered.thread, thread, { inThread: true, empty: "" });
      $("thread-messages").firstChild?.classList.add("thread-parent");
      renderSession(openThread);
    }
    renderModal();
  }

  // ---------------------------------------------------------------- App Home

  function openHome() {
    homeOpen = true;
    openThread = null;
    shownHome = null;
    render();
    // Slack sends `app_home_opened`; the bot publishes the view, which a live change brings.
    api("/api/home/open", { user: me }).catch(() => {});
  }

  function renderHome() {
    const view = state.home;
    const sig = JSON.stringify([me, view]);
    if (shownHome === sig) return;
    shownHome = sig;
    if (!view) {
      $("home").replaceChildren(h("div", { className: "empty" }, "The app has not published a Home view for you yet."));
      return;
    }
    const ctx = {
      kind: "home",
      values: homeValues,
      dispatch: (action) => api("/api/home/actions", { user: me, action }).catch(() => {}),
    };
    $("home").replaceChildren(blocks(view.blocks, ctx));
  }

  /** A thread link in Home (`…/archives/<channel>/p<ts digits>`) opens that thread here. */
  function followHomeLink(event) {
    const link = event.target.closest("a");
    const match = link && /\/archives\/([A-Z0-9]+)\/p(\d{7,})$/.exec(link.getAttribute("href") || "");
    if (!match) return;
    event.preventDefault();
    const ts = `${match[2].slice(0, -6)}.${match[2].slice(-6)}`;
    const message = state.messages.find((m) => m.channel === match[1] && m.ts === ts);
    channel = match[1];
    homeOpen = false;
    openThread = message ? message.thread_ts || message.ts : null;
    render();
  }

  // ---------------------------------------------------------------- modals

  let shownView = null; // {id, hash} of the modal on screen, so live updates keep typed input
  const viewValues = {};

  function renderModal() {
    const root = $("modal-root");
    const top = state.views.filter((v) => v.user === me).at(-1);
    if (!top) { root.replaceChildren(); shownView = null; return; }
    const sig = JSON.stringify([top.id, top.view, viewErrors[top.id] || null]);
    if (shownView && shownView.sig === sig) return;
    shownView = { id: top.id, sig };
    const view = top.view;
    const ctx = {
      kind: "view",
      values: (viewValues[top.id] ||= {}),
      errors: viewErrors[top.id],
      // LocalSlack has no block_actions from modals; say so rather than fail a request.
      dispatch: () => toast("The playground does not send actions from inside a modal."),
    };
    // novalidate: the bot checks submissions and answers with inline errors, as in Slack.
    const form = h("form", {
      className: "modal", role: "dialog", "aria-label": plain(view.title) || "Modal", novalidate: true,
      dataset: { viewId: top.id, callbackId: view.callback_id || "" },
    },
      h("div", { className: "modal-title" }, plain(view.title)),
      h("div", { className: "modal-body" }, blocks(view.blocks, ctx)),
      h("div", { className: "modal-foot" },
        h("button", { type: "button", className: "btn", onclick: () => closeView(top.id) }, plain(view.close) || "Cancel"),
        view.submit ? h("button", { type: "submit", className: "btn primary" }, plain(view.submit)) : null));
    form.addEventListener("submit", (event) => { event.preventDefault(); submitView(top.id, ctx.values); });
    root.replaceChildren(h("div", { className: "modal-backdrop" }, form));
    form.querySelector("input, textarea, select")?.focus();
  }

  async function submitView(viewId, values) {
    const result = await api("/api/views/submit", { user: me, view_id: viewId, values }).catch(() => null);
    if (!result) return;
    if (result.response_action === "errors") {
      viewErrors[viewId] = result.errors || {};
      shownView = null;
      renderModal();
      return;
    }
    delete viewErrors[viewId];
    delete viewValues[viewId];
    await refresh();
  }

  async function closeView(viewId) {
    await api("/api/views/close", { user: me, view_id: viewId }).catch(() => {});
    delete viewErrors[viewId];
    delete viewValues[viewId];
    await refresh();
  }

  // ---------------------------------------------------------------- actions

  async function sendAction(message, action) {
    await api("/api/actions", {
      user: me, channel: message.channel, message_ts: message.ts,
      ephemeral: Boolean(message.ephemeral_to), action, values: localValues[message.ts] || {},
    }).catch(() => {});
  }

  async function sendMessage(text, threadTs) {
    const trimmed = text.trim();
    if (!trimmed) return;
    if (!threadTs) awaitingThread = trimmed;
    await api("/api/messages", { user: me, channel, text: trimmed, thread_ts: threadTs || null });
    await refresh();
  }

  function actAs(userId) {
    me = userId;
    localStorage.setItem("pg-as", me);
    shownView = null;
    rendered.main.clear();
    rendered.thread.clear();
    if (homeOpen) openHome();
    refresh();
  }

  function showThread(ts) {
    openThread = ts;
    render();
  }

  // ---------------------------------------------------------------- live updates

  let refreshing = null;
  let again = false;
  async function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async () => {
      do {
        again = false;
        const query = me ? `?user=${encodeURIComponent(me)}` : "";
        state = await api(`/api/state${query}`);
        if (!me || !state.users.some((u) => u.id === me && !u.is_bot)) me = state.default_user;
        if (!channel) channel = state.default_channel;
        render();
      } while (again);
    })().finally(() => { refreshing = null; });
    return refreshing;
  }

  function listen() {
    const source = new EventSource("/api/events");
    const conn = $("conn");
    source.addEventListener("open", () => { conn.textContent = "live"; conn.classList.add("live"); refresh(); });
    source.addEventListener("change", () => refresh());
    source.addEventListener("error", () => { conn.textContent = "reconnecting…"; conn.classList.remove("live"); });
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("composer-input");
      const text = input.value;
      input.value = "";
      sendMessage(text, null).catch(() => {});
    });
    $("thread-composer").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("thread-input");
      // A reply never turns into a new request: with no thread open there is nothing to reply to.
      if (!openThread) { toast("Open a thread to reply in it."); return; }
      const text = input.value;
      input.value = "";
      sendMessage(text, openThread).catch(() => {});
    });
    $("thread-close").addEventListener("click", () => { openThread = null; render(); });
    $("home-tab").addEventListener("click", () => openHome());
    $("home").addEventListener("click", followHomeLink);
    $("as").addEventListener("change", (event) => actAs(event.target.value));
    // Escape dismisses the topmost dialog, as in Slack: a confirmation, else the modal (Cancel).
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      const confirm = [...document.querySelectorAll(".modal-backdrop[data-confirm]")].at(-1);
      if (confirm) confirm.remove();
      else if (shownView) closeView(shownView.id);
      else return;
      event.preventDefault();
    });
    refresh().then(listen, () => setTimeout(listen, 1000));
  });
})();
