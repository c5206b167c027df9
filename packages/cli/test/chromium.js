// How the browser tests and the dashboard bench start Chromium: Debian's (never a browser download),
// headless, driven by playwright-core, with a fresh profile of its own (removed on close). Without
// the background-networking flags this machine's closed network refuses Chromium's connections.
import { chromium } from "playwright-core";

const CHROMIUM = "/usr/bin/chromium";

export function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
