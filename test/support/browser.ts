// Debian's chromium driven by puppeteer-core (which downloads no browser): `.ci/run` installs the package.
import puppeteer, { type Browser } from 'puppeteer-core';
import { onPath } from './tools.js';

/** chromium as the PATH finds it (Debian's /usr/bin/chromium) */
const CHROMIUM = onPath('chromium') ?? '/usr/bin/chromium';
/** without the background-networking flags chromium's own connections are refused on a closed network, and it waits */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A headless chromium with a fresh profile in `profileDir`; close it when done. */
export function launchChromium(profileDir: string): Promise<Browser> {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: profileDir,
    args: CHROMIUM_FLAGS,
    protocolTimeout: 30_000,
  });
}
