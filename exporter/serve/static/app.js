// The console's router: one page, four views chosen by the path. Links marked data-nav
// change the view without reloading (the History API); the server answers every such path
// with this page, so reloading or sharing a URL works.

import { el } from "./util.js";
import { mountGroups } from "./groups.js";
import { mountGroup } from "./group.js";
import { mountLive } from "./live.js";
import { mountHealth } from "./health.js";

const main = document.getElementById("main");
let current = null;

function viewFor(path) {
  if (path === "/" || path === "/groups" || path === "/groups/") return ["groups", mountGroups, null];
  if (path.startsWith("/groups/")) {
    return ["groups", mountGroup, decodeURIComponent(path.slice("/groups/".length))];
  }
  if (path === "/live") return ["live", mountLive, null];
  if (path === "/health") return ["health", mountHealth, null];
  return [null, null, null];
}

function show(focus) {
  current?.unmount();
  current = null;
  const [section, mount, arg] = viewFor(location.pathname);
  for (const link of document.querySelectorAll("nav a[data-section]")) {
    if (link.dataset.section === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  // the server already wrote "no such group" into the page: keep it until the view agrees
  const missing = main.querySelector('[data-view="missing"]');
  if (!missing) main.replaceChildren();
  if (!mount) {
    main.replaceChildren(el("h1", {}, "Not found"), el("p", {}, "The console has no such page."));
    return;
  }
  current = mount(main, arg);
  if (focus) main.focus();
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-nav]");
  if (!link || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(link.href);
  if (url.origin !== location.origin) return;
  event.preventDefault();
  if (url.pathname + url.search !== location.pathname + location.search) {
    history.pushState(null, "", url.pathname + url.search);
  }
  show(true);
});

window.addEventListener("popstate", () => show(true));

// "/" moves to the page's filter, as in many consoles; Escape leaves it
document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement?.tagName ?? "");
  if (event.key === "/" && !typing) {
    const filter = main.querySelector("[data-filter]");
    if (filter) { event.preventDefault(); filter.focus(); }
  } else if (event.key === "Escape" && typing) {
    document.activeElement.blur();
  }
});

show(false);
