import type { Browser } from "playwright-core";

/** Debian's Chromium, headless, with the flags this machine needs. */
export declare function launch(): Promise<Browser>;
