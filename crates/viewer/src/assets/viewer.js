// auditctl ui: loading more rows as one scrolls, times with the local offset on hover, and
// keyboard moves through the rows (j/k or arrows, Enter opens). Part of the binary; it fetches
// only from this viewer. Without it the page still works: "Load more" is a link.
"use strict";

function localTitle(el) {
  const t = new Date(el.getAttribute("datetime"));
  if (isNaN(t)) return;
  const offset = -t.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  const abs = Math.abs(offset);
  const hh = String(Math.floor(abs / 60)).padStart(2, "0");
  const mm = String(abs % 60).padStart(2, "0");
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  const local = `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ` +
    `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}.${pad(t.getMilliseconds(), 3)}`;
  el.title = `${el.getAttribute("datetime")} = ${local} local time (UTC${sign}${hh}:${mm})`;
}

function localTitles(root) {
  root.querySelectorAll("time[datetime]").forEach(localTitle);
}

let loading = false;

async function loadMore() {
  const more = document.getElementById("more");
  if (!more || loading) return;
  loading = true;
  more.textContent = "Loading…";
  try {
    const response = await fetch(more.dataset.rows, { credentials: "same-origin" });
    const text = await response.text();
    const holder = document.createElement("div");
    holder.innerHTML = text;
    if (!response.ok) {
      const box = holder.firstElementChild || holder;
      more.parentElement.replaceWith(box);
      const retry = document.createElement("p");
      retry.className = "more";
      retry.innerHTML = '<button type="button" id="retry">Retry</button>';
      box.after(retry);
      document.getElementById("retry").addEventListener("click", () => {
        box.remove();
        retry.replaceWith(more.parentElement);
        more.textContent = "Load more (older)";
        loadMore();
      });
      return;
    }
    const template = holder.querySelector("template");
    const rows = template.content.querySelectorAll("tbody tr");
    const tbody = document.getElementById("rows");
    rows.forEach((row) => { localTitles(row); tbody.appendChild(row); });
    const next = template.content.querySelector(".more");
    more.parentElement.replaceWith(next);
    observe();
  } catch (error) {
    more.textContent = "Loading failed: " + error + " (select to retry)";
  } finally {
    loading = false;
  }
}

let observer = null;

function observe() {
  const more = document.getElementById("more");
  if (!more) return;
  more.addEventListener("click", (event) => { event.preventDefault(); loadMore(); });
  if ("IntersectionObserver" in window) {
    if (observer) observer.disconnect();
    observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) loadMore();
    }, { rootMargin: "400px" });
    observer.observe(more);
  }
}

function rowKeys() {
  document.addEventListener("keydown", (event) => {
    if (event.target.closest("input, select, textarea") || event.altKey || event.ctrlKey || event.metaKey) return;
    const rows = Array.from(document.querySelectorAll("#rows tr"));
    if (rows.length === 0) return;
    const current = document.querySelector("#rows tr.current");
    let index = rows.indexOf(current);
    if (event.key === "j" || event.key === "ArrowDown" && current) index = Math.min(index + 1, rows.length - 1);
    else if (event.key === "k" || event.key === "ArrowUp" && current) index = Math.max(index - 1, 0);
    else if (event.key === "Enter" && current && document.activeElement === current) {
      current.querySelector("a.open").click();
      return;
    } else return;
    event.preventDefault();
    if (current) current.classList.remove("current");
    const row = rows[index];
    row.classList.add("current");
    row.tabIndex = -1;
    row.focus();
    if (index === rows.length - 1) loadMore();
  });
}

async function loadChart() {
  const slot = document.getElementById("chart");
  if (!slot || !slot.dataset.src) return;
  try {
    const response = await fetch(slot.dataset.src, { credentials: "same-origin" });
    slot.innerHTML = await response.text();
  } catch (error) {
    slot.textContent = "The chart could not be loaded: " + error;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  localTitles(document);
  loadChart();
  observe();
  rowKeys();
});
