"""lakeFS access shared by every domain: the client factory and error translation, the staged-state query."""
