"""knn kernel family."""
