// Package browser drives Debian's Chromium, headless, from Go tests
// (chromedp): it starts a fresh browser per test, keeps screenshots as test
// artifacts, and checks a page's accessibility (every control named, text
// contrast of at least 4.5:1 from computed styles).
//
// A test that needs a browser fails, never skips, when /usr/bin/chromium
// (or $CHROMIUM) is missing: `apt-get install -y chromium` installs it.
// Chromium runs with its background networking, component updates and
// sync off, so it opens no connection but those the test asks for, and
// with a new profile in the test's temporary directory.
package browser
