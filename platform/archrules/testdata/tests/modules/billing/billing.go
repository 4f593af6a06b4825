// Package billing is a module whose code keeps every rule.
package billing

import _ "example.com/fake/platform/outbox"
