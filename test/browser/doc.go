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
//
// Started with ClientCertificate, the browser presents a client
// certificate to the servers that ask for one, without a dialog: Start
// puts it in an NSS database in a HOME of the browser's own, with Debian's
// pk12util (`apt-get install -y libnss3-tools`; without it such a test
// fails, never skips), and sets the profile's preference that picks it
// automatically. The certificate goes nowhere outside the test's temporary
// directory: in no policy file in /etc, in no database in the user's HOME.
package browser
