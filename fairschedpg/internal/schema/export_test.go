package schema

// MigrateTo is Migrate up to version to, for the test of an upgrade.
var MigrateTo = migrateTo
