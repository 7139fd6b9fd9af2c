// Package browsertest drives the admin page of fairschedhttp in a real
// headless Chromium (Debian's chromium package), through chromedp. It is
// a module of its own, so that the browser driver is never a dependency
// of fairsched's users; .ci/run installs Chromium and runs it.
package browsertest
