/* Oklab, as inference/colour.py computes it: the page previews a strength and Keep colours with the server's
   own maths, so that what the slider shows is what Keep draws. Pure functions of pixel arrays. */

const RGB_TO_LMS = [[0.4122214708, 0.5363325363, 0.0514459929], [0.2119034982, 0.6806995451, 0.1073969566],
                    [0.0883024619, 0.2817188376, 0.6299787005]];
const LMS_TO_LAB = [[0.2104542553, 0.7936177850, -0.0040720468], [1.9779984951, -2.4285922050, 0.4505937099],
                    [0.0259040371, 0.7827717662, -0.8086757660]];
const LAB_TO_LMS = invert(LMS_TO_LAB);
const LMS_TO_RGB = invert(RGB_TO_LMS);
const TO_LINEAR = Float32Array.from({ length: 256 }, (_, i) => {
  const c = i / 255;
  return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
});
const GREY_CHROMA = 1e-4;
const GAMMA_STEPS = 8192;  // linear light to sRGB by table: fine enough that no byte comes out differently
const TO_SRGB = Uint8ClampedArray.from({ length: GAMMA_STEPS + 1 }, (_, i) => {
  const l = i / GAMMA_STEPS;
  return Math.round(255 * (l <= 0.0031308 ? 12.92 * l : 1.055 * l ** (1 / 2.4) - 0.055));
});

function invert(m) {
  const [[a, b, c], [d, e, f], [g, h, i]] = m;
  const det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
  return [[(e * i - f * h) / det, (c * h - b * i) / det, (b * f - c * e) / det],
          [(f * g - d * i) / det, (a * i - c * g) / det, (c * d - a * f) / det],
          [(d * h - e * g) / det, (b * g - a * h) / det, (a * e - b * d) / det]];
}

export function oklab(rgba) {
  const n = rgba.length / 4;
  const lab = new Float32Array(n * 3);
  const [m, k] = [RGB_TO_LMS, LMS_TO_LAB];
  for (let p = 0; p < n; p++) {
    const r = TO_LINEAR[rgba[4 * p]], g = TO_LINEAR[rgba[4 * p + 1]], b = TO_LINEAR[rgba[4 * p + 2]];
    const l = Math.cbrt(m[0][0] * r + m[0][1] * g + m[0][2] * b);
    const mm = Math.cbrt(m[1][0] * r + m[1][1] * g + m[1][2] * b);
    const s = Math.cbrt(m[2][0] * r + m[2][1] * g + m[2][2] * b);
    lab[3 * p] = k[0][0] * l + k[0][1] * mm + k[0][2] * s;
    lab[3 * p + 1] = k[1][0] * l + k[1][1] * mm + k[1][2] * s;
    lab[3 * p + 2] = k[2][0] * l + k[2][1] * mm + k[2][2] * s;
  }
  return lab;
}

/* Keep colours: the drawing's lightness with the photo's colours, made a picture (in sRGB, out-of-gamut
   colours clipped) before it is blended, as the server makes it. */
export function keptColours(photo, drawn) {
  const lab = Float32Array.from(photo);
  for (let p = 0; p < lab.length; p += 3) lab[p] = drawn[p];
  const rgba = new Uint8ClampedArray(lab.length / 3 * 4);
  mix(lab, lab, 1, rgba);
  return oklab(rgba);
}

/* Photo towards drawing by t in OkLCh (lightness and chroma straight, hue the shorter way round), written
   into out as RGBA. */
export function mix(photo, drawn, t, out) {
  const [q, m] = [LAB_TO_LMS, LMS_TO_RGB];
  const n = photo.length / 3;
  for (let p = 0; p < n; p++) {
    const Lp = photo[3 * p], ap = photo[3 * p + 1], bp = photo[3 * p + 2];
    const La = drawn[3 * p], aa = drawn[3 * p + 1], ba = drawn[3 * p + 2];
    let L = La, A = aa, B = ba;
    if (t <= 0) { L = Lp; A = ap; B = bp; } else if (t < 1) {
      const cp = Math.hypot(ap, bp), ca = Math.hypot(aa, ba);
      // A grey has no hue of its own: it takes the other side's (GREY_CHROMA in inference/colour.py).
      let hp = Math.atan2(bp, ap), ha = Math.atan2(ba, aa);
      if (cp < GREY_CHROMA) hp = ha;
      else if (ca < GREY_CHROMA) ha = hp;
      let dh = (ha - hp + Math.PI) % (2 * Math.PI);
      if (dh < 0) dh += 2 * Math.PI;  // Python's % is floored; JavaScript's keeps the sign
      const hue = hp + t * (dh - Math.PI);
      const chroma = cp + t * (ca - cp);
      L = Lp + t * (La - Lp);
      A = chroma * Math.cos(hue);
      B = chroma * Math.sin(hue);
    }
    const l = (q[0][0] * L + q[0][1] * A + q[0][2] * B) ** 3;
    const mm = (q[1][0] * L + q[1][1] * A + q[1][2] * B) ** 3;
    const s = (q[2][0] * L + q[2][1] * A + q[2][2] * B) ** 3;
    for (let c = 0; c < 3; c++) {
      const linear = Math.min(1, Math.max(0, m[c][0] * l + m[c][1] * mm + m[c][2] * s));
      out[4 * p + c] = TO_SRGB[Math.round(linear * GAMMA_STEPS)];
    }
    out[4 * p + 3] = 255;
  }
}
