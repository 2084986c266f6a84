/* The before/after divider: dragged, or moved with the arrow keys; the photo's share is counted from where
   reading starts, so right to left it is the right-hand part. */
import { rtl } from "./words.js";

const $ = (id) => document.getElementById(id);

export function setSplit(percent) {
  const split = Math.max(0, Math.min(100, percent));
  $("compare").style.setProperty("--split", split + "%");
  $("divider").setAttribute("aria-valuenow", String(Math.round(split)));
}

export function followDivider() {
  const area = $("compare");
  let dragging = false;
  const moveTo = (event) => {
    const box = area.getBoundingClientRect();
    const fromLeft = ((event.clientX - box.left) / box.width) * 100;
    setSplit(rtl() ? 100 - fromLeft : fromLeft);  // the split is measured from where reading starts
  };
  area.addEventListener("pointerdown", (event) => {
    if ($("divider").hidden) return;
    dragging = true;
    area.setPointerCapture(event.pointerId);
    moveTo(event);
  });
  area.addEventListener("pointermove", (event) => { if (dragging) moveTo(event); });
  const stop = () => { dragging = false; };
  area.addEventListener("pointerup", stop);
  area.addEventListener("pointercancel", stop);
  $("divider").addEventListener("keydown", (event) => {
    const now = Number($("divider").getAttribute("aria-valuenow") || 50);
    const forward = rtl() ? -5 : 5;  // right to left, the left arrow moves the divider on
    const step = { ArrowLeft: -forward, ArrowRight: forward, Home: -100, End: 100 }[event.key];
    if (step !== undefined) { setSplit(now + step); event.preventDefault(); }
  });
}
