//go:build tools

// Package tools pins the lakeFS server command as a dependency of this module.
package tools

import _ "github.com/treeverse/lakefs/cmd/lakefs"
